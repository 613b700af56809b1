/**
 * A released migration is frozen: a database migrated by that release keeps what it ran, and a later edit of its
 * text would make a fresh database differ from every upgraded one. Each released migration's statements (for one
 * schema name) are fingerprinted here as the release shipped them; the test fails when any of them changes or
 * disappears. An unreleased migration may change until its release; then its fingerprint joins the table.
 */
import { describe, expect, it } from "@effect/vitest"
import { SchemaName } from "@resilience/schema"
import { createHash } from "node:crypto"
import * as Domain from "../src/Domain.ts"

/**
 * What each release shipped: component → version → the first 16 hex digits of the SHA-256 of its statements joined
 * by "\n;\n", for the schema `tenant`. 0.2.0's were computed in a checkout of its commit (releases/0.2.0.json).
 */
const released: Readonly<Record<string, Readonly<Record<string, Readonly<Record<number, string>>>>>> = {
  "0.2.0": {
    queue: {
      1: "b428374a8c56b448",
      2: "16668011cdeef957",
      3: "2a1132a35c5352f1",
      4: "7cefc75db980c81a",
      5: "a28a75bb306a2e5b",
      6: "cc4fea477ab11062",
      7: "aa370aa3f82382eb"
    },
    domain: {
      1: "dbb945bb071d3591",
      2: "91b980f30c3f37f8",
      3: "47c0fb264ed34c02",
      4: "f49f0495037fcb8d",
      5: "1d26b2c4522b116d",
      6: "00acd5646dd0f01b"
    }
  }
}

const schema = SchemaName.makeUnsafe("tenant")

/** The fingerprints of this tree's migrations, by component and version. */
const current = (): Record<string, Record<number, string>> =>
  Object.fromEntries(
    Domain.components.map((component) => [
      component.name,
      Object.fromEntries(
        component.migrations.map((migration) => [
          migration.version,
          createHash("sha256").update(migration.up(schema).join("\n;\n")).digest("hex").slice(0, 16)
        ])
      )
    ])
  )

describe("released migrations", () => {
  for (const [release, components] of Object.entries(released)) {
    it(`every migration ${release} shipped has its text as shipped`, () => {
      const now = current()
      for (const [component, versions] of Object.entries(components)) {
        for (const [version, fingerprint] of Object.entries(versions)) {
          expect(
            now[component]?.[Number(version)],
            `${component} migration ${version} was released in ${release}: add a new migration instead of editing it`
          ).toBe(fingerprint)
        }
      }
    })
  }
})
