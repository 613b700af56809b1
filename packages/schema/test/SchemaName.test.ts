import { assert, describe, it, layer } from "@effect/vitest"
import { DbSession, QueryFailed } from "@resilience/db-session"
import { ConfigProvider, Effect, Exit } from "effect"
import * as Migrator from "../src/Migrator.ts"
import * as SchemaName from "../src/SchemaName.ts"
import { component, Database, migrations } from "./support.ts"

describe("SchemaName", () => {
  it("accepts plain lower-case identifiers", () => {
    for (const name of ["public", "tenant_1", "_x", "a".repeat(63)]) assert.isTrue(SchemaName.isValid(name), name)
  })

  it("rejects everything that could break out of an identifier", () => {
    for (
      const name of [
        "",
        "Tenant",
        "1tenant",
        "a".repeat(64),
        "x; DROP TABLE queue; --",
        "x\"; DROP SCHEMA public CASCADE; --",
        "x.y",
        "x y",
        "x'",
        "ünïcode",
        "pg_catalog",
        "pg_temp",
        "information_schema",
        "x\u0000"
      ]
    ) {
      assert.isFalse(SchemaName.isValid(name), JSON.stringify(name))
      const exit = Effect.runSyncExit(SchemaName.make(name))
      assert.isTrue(Exit.isFailure(exit), JSON.stringify(name))
    }
  })

  it("quotes identifiers, doubling inner quotes", () => {
    assert.strictEqual(SchemaName.quote(SchemaName.makeUnsafe("tenant_1")), "\"tenant_1\"")
    assert.strictEqual(SchemaName.qualify(SchemaName.makeUnsafe("t"), "queue"), "\"t\".\"queue\"")
    assert.strictEqual(SchemaName.quoteIdentifier("a\"b"), "\"a\"\"b\"")
  })

  it("makeUnsafe throws on an invalid name", () => {
    assert.throws(() => SchemaName.makeUnsafe("x; --"))
  })

  it.effect("reads DB_SCHEMA, defaulting to public, and names the variable when it is invalid", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        SchemaName.config("DB_SCHEMA").parse(ConfigProvider.fromEnv({ env })).pipe(Effect.exit)
      const defaulted = yield* read({})
      assert.deepStrictEqual(defaulted, Exit.succeed(SchemaName.makeUnsafe("public")))
      const invalid = yield* read({ DB_SCHEMA: "x\"; drop" })
      assert.isTrue(Exit.isFailure(invalid))
      assert.include(String(invalid), "DB_SCHEMA")
    }))
})

layer(Database, { excludeTestServices: true })("Migrator (PostgreSQL)", (it) => {
  it.effect("concurrent starts migrate once and all succeed", () =>
    Effect.gen(function*() {
      const schema = SchemaName.makeUnsafe("concurrent_start")
      const results = yield* Effect.all(
        Array.from({ length: 6 }, () => Migrator.run(schema, [component])),
        { concurrency: "unbounded" }
      )
      const applied = results.flat()
      assert.strictEqual(applied.length, migrations.length, "each migration ran exactly once")
      const db = yield* DbSession
      const rows = yield* db.query<{ version: number }>(
        `SELECT version FROM ${SchemaName.qualify(schema, Migrator.table)} WHERE component = 'notes' ORDER BY version`
      )
      assert.deepStrictEqual(rows.map((r) => r.version), migrations.map((m) => m.version))
      assert.deepStrictEqual(yield* Migrator.run(schema, [component]), [])
    }))

  it.effect("a later migration is applied on top of earlier ones", () =>
    Effect.gen(function*() {
      const schema = SchemaName.makeUnsafe("upgrade_path")
      yield* Migrator.run(schema, [{ name: "notes", migrations: migrations.slice(0, 1) }])
      const second = yield* Migrator.run(schema, [component])
      assert.deepStrictEqual(second.map((m) => m.version), migrations.slice(1).map((m) => m.version))
    }))
})

layer(Database, { excludeTestServices: true })("SchemaName (PostgreSQL)", (it) => {
  it.effect("a schema name with every allowed character class works end to end", () =>
    Effect.gen(function*() {
      const schema = SchemaName.makeUnsafe("_tenant_0042_x")
      yield* Migrator.run(schema, [component])
      const db = yield* DbSession
      yield* db.query(`INSERT INTO ${SchemaName.qualify(schema, "notes")} (body) VALUES ($1)`, ["u'; drop table x; --"])
      const rows = yield* db.query<{ body: string }>(`SELECT body FROM ${SchemaName.qualify(schema, "notes")}`)
      assert.deepStrictEqual(rows.map((row) => row.body), ["u'; drop table x; --"])
      assert.strictEqual(yield* Migrator.pending(schema, [component]), 0)
    }))
})

describe("Migrator.describeFailure", () => {
  it("renders Tag: message on one line, at most 2,000 characters", () => {
    assert.strictEqual(
      Migrator.describeFailure(new QueryFailed({ code: "42601", message: "syntax error" })),
      "QueryFailed: syntax error"
    )
    const long = Migrator.describeFailure(new QueryFailed({ code: undefined, message: "x".repeat(5000) }))
    assert.strictEqual(long.length, 2000)
    assert.isTrue(long.endsWith("…"))
  })
})

describe("Migrator.withNames", () => {
  it("writes a migration's statements from the names of the schema it runs in", () => {
    const migration = Migrator.withNames((schema) => ({ notes: SchemaName.qualify(schema, "notes") }))(
      4,
      "notes_body_idx",
      ({ notes }) => [`CREATE INDEX notes_body_idx ON ${notes} (body)`]
    )
    assert.strictEqual(migration.version, 4)
    assert.strictEqual(migration.name, "notes_body_idx")
    assert.deepStrictEqual(migration.up(SchemaName.makeUnsafe("tenant_a")), [
      `CREATE INDEX notes_body_idx ON "tenant_a"."notes" (body)`
    ])
    assert.deepStrictEqual(migration.up(SchemaName.makeUnsafe("tenant_b")), [
      `CREATE INDEX notes_body_idx ON "tenant_b"."notes" (body)`
    ])
  })
})
