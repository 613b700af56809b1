/**
 * Shared pieces of the PostgreSQL suites: a DbSession on the suite's own database and a small migrations component
 * (the package migrates whatever it is given; the queue's and the domain's components live elsewhere).
 */
import { DbSession } from "@resilience/db-session"
import { type TestDatabase, TestSession } from "@resilience/test-db"
import { Layer } from "effect"
import type * as Migrator from "../src/Migrator.ts"
import * as SchemaName from "../src/SchemaName.ts"

/** A session on a fresh database of the shared test server (in-process pool, for speed). */
export const Database: Layer.Layer<DbSession | TestDatabase> = TestSession.layer(DbSession.layer, {
  applicationName: "schema-test"
})
  .pipe(Layer.orDie)

/** Three migrations of a `notes` table: create it, add a column, index it. */
export const migrations: ReadonlyArray<Migrator.Migration> = [
  {
    version: 1,
    name: "notes",
    up: (schema) => [
      `CREATE TABLE ${
        SchemaName.qualify(schema, "notes")
      } (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text NOT NULL)`
    ]
  },
  {
    version: 2,
    name: "notes_created_at",
    up: (schema) => [
      `ALTER TABLE ${SchemaName.qualify(schema, "notes")} ADD COLUMN created_at timestamptz NOT NULL DEFAULT now()`
    ]
  },
  {
    version: 3,
    name: "notes_created_at_idx",
    up: (schema) => [
      `CREATE INDEX notes_created_at_idx ON ${SchemaName.qualify(schema, "notes")} (created_at)`
    ]
  }
]

/** The test component (`notes`). */
export const component: Migrator.Component = { name: "notes", migrations }
