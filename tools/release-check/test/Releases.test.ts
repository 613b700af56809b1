import { assert, describe, it } from "@effect/vitest"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { Releases } from "../src/index.ts"

const record = (name: string, date: string) => ({
  name,
  commit: "13d7119b4014ebe953a4cf71931f16d2fa8ae847",
  date,
  packages: { "@resilience/jitter": name },
  apps: { "@resilience/api-app": "0.1.0" }
})

const withRecords = (files: Record<string, unknown>, body: (root: string) => void) => {
  const root = mkdtempSync(join(tmpdir(), "releases-test-"))
  try {
    mkdirSync(join(root, Releases.folder))
    for (const [file, content] of Object.entries(files)) {
      writeFileSync(join(root, Releases.folder, file), JSON.stringify(content))
    }
    body(root)
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

describe("Releases", () => {
  it("the latest is the latest date, not the last name", () => {
    withRecords({
      "0.10.0.json": record("0.10.0", "2027-02-01T00:00:00Z"),
      "0.9.0.json": record("0.9.0", "2027-01-01T00:00:00Z")
    }, (root) => {
      assert.deepStrictEqual(Releases.all(root).map((r) => r.name), ["0.9.0", "0.10.0"])
      assert.strictEqual(Releases.latest(root)?.name, "0.10.0")
    })
  })

  it("a record that does not decode, or whose name is not its file's, stops naming the file", () => {
    withRecords({ "0.3.0.json": { ...record("0.3.0", "2027-01-01T00:00:00Z"), commit: "13d7119" } }, (root) => {
      assert.throws(() => Releases.all(root), /releases\/0\.3\.0\.json is not a release record/)
    })
    withRecords({ "0.3.0.json": record("0.4.0", "2027-01-01T00:00:00Z") }, (root) => {
      assert.throws(() => Releases.all(root), /releases\/0\.3\.0\.json is not a release record: its name is 0\.4\.0/)
    })
  })

  it("the repository's own records decode", () => {
    const root = resolve(import.meta.dirname, "../../..")
    assert.isAbove(Releases.all(root).length, 0)
  })
})
