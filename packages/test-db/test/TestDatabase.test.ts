import { assert, describe, it, layer } from "@effect/vitest"
import { TestDatabase } from "@resilience/test-db"
import { Context, Effect, Layer } from "effect"
import pg from "pg"

const query = (url: string, sql: string) =>
  Effect.acquireUseRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.query(sql)),
    (client) => Effect.promise(() => client.end())
  )

/** Builds a suite's database inside the caller's scope, as a separate suite would. */
const suiteDatabase = Layer.build(Layer.fresh(TestDatabase.layer)).pipe(
  Effect.map((context) => Context.get(context, TestDatabase))
)

describe("TestDatabase", () => {
  layer(TestDatabase.layer)((it) => {
    it.effect("round-trips a query on real PostgreSQL", () =>
      Effect.gen(function*() {
        const { url } = yield* TestDatabase
        const result = yield* query(url, "SELECT 1 + 1 AS two, version() AS version")
        assert.strictEqual(result.rows[0].two, 2)
        assert.match(result.rows[0].version, /^PostgreSQL \d+/)
      }))
  })

  it.effect("gives two suites databases that do not see each other's data", () =>
    Effect.gen(function*() {
      const a = yield* suiteDatabase
      const b = yield* suiteDatabase
      assert.notStrictEqual(a.database, b.database)
      yield* query(a.url, "CREATE TABLE secrets (value text); INSERT INTO secrets VALUES ('only in a')")
      const visibleInB = yield* query(b.url, "SELECT to_regclass('public.secrets') IS NOT NULL AS visible")
      assert.isFalse(visibleInB.rows[0].visible)
    }).pipe(Effect.scoped))

  it.effect("drops the suite's database when the layer is released", () =>
    Effect.gen(function*() {
      const suite = yield* Effect.scoped(suiteDatabase)
      const left = yield* query(
        suite.serverUrl,
        `SELECT count(*)::int AS n FROM pg_database WHERE datname = '${suite.database}'`
      )
      assert.strictEqual(left.rows[0].n, 0)
    }))
})
