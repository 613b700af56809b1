/**
 * The dead-letter command as a process (`src/deadLetters.ts`) against a real PostgreSQL: lists the dead
 * letters of `DB_SCHEMA`, replays a unit's, and refuses a bad command line with its usage (exit 2).
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { QueueSchema } from "@resilience/deriver"
import { Migrator, SchemaName } from "@resilience/schema"
import { EntryPoint, TestDatabase, TestSession } from "@resilience/test-db"
import { Effect } from "effect"
import { execFile } from "node:child_process"

const Database = TestSession.layer(DbSession.layer, { poolSize: 2 })

/** Runs the command with `args`; its exit code and output. */
const command = (url: string, schema: string, args: ReadonlyArray<string>) =>
  Effect.promise(() =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ["--conditions=@resilience/source", "apps/deriver/src/deadLetters.ts", ...args],
        {
          cwd: EntryPoint.root,
          env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATABASE_URL: url, DB_SCHEMA: schema }
        },
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : Number(error.code ?? 1), stdout, stderr })
      )
    )
  )

layer(Database, { excludeTestServices: true })("dead-letter command (PostgreSQL)", (it) => {
  it.effect("lists and replays dead letters; a bad command line exits 2 with the usage", () =>
    Effect.gen(function*() {
      const { url } = yield* TestDatabase
      const schema = SchemaName.makeUnsafe("dead_letters")
      yield* Migrator.run(schema, [QueueSchema.component])
      const db = yield* DbSession
      const queue = SchemaName.qualify(schema, "queue")
      yield* db.query(
        `INSERT INTO ${queue} (work_unit_key, task_type, attempts, last_error, run_at, dead_at)
         VALUES ('u', 'call', 15, 'provider 503', 'infinity', now()), ('v', 'call', 15, 'provider 503', 'infinity', now()),
                ('u', 'call', 0, NULL, NULL, NULL)`
      )
      const listed = yield* command(url, schema, ["list", "--task-type", "call"])
      assert.strictEqual(listed.code, 0, listed.stderr)
      const letters = listed.stdout.trim().split("\n").map((line) =>
        JSON.parse(line) as { id: string; lastError: string }
      )
      assert.deepStrictEqual(letters.map((l) => [l.id, l.lastError]), [["1", "provider 503"], ["2", "provider 503"]])

      const replayed = yield* command(url, schema, ["replay", "--unit", "u"])
      assert.strictEqual(replayed.code, 0, replayed.stderr)
      assert.strictEqual(replayed.stdout.trim(), "replayed 1 dead letter")
      const rows = yield* db.query<{ id: string; attempts: number; dead: boolean; due: boolean }>(
        `SELECT id::text, attempts, dead_at IS NOT NULL AS dead, run_at IS NULL AS due FROM ${queue} ORDER BY id`
      )
      assert.deepStrictEqual(rows.map((r) => [r.id, r.attempts, r.dead, r.due]), [
        ["1", 0, false, true],
        ["2", 15, true, false],
        ["3", 0, false, true]
      ])

      const bad = yield* command(url, schema, ["replay"])
      assert.strictEqual(bad.code, 2)
      assert.include(bad.stderr, "replay needs --id, --unit, --task-type or --all")
      assert.include(bad.stderr, "usage: deriver-dead-letters")
    }))
})
