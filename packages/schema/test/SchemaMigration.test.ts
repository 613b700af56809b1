import { assert, describe, it, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { ClosedPort, Eventually, TestDatabase } from "@resilience/test-db"
import { Effect, Fiber, Layer, Logger, References } from "effect"
import { TestClock } from "effect/testing"
import { randomBytes } from "node:crypto"
import * as Migrator from "../src/Migrator.ts"
import * as SchemaMigration from "../src/SchemaMigration.ts"
import * as SchemaName from "../src/SchemaName.ts"
import { component, Database } from "./support.ts"

const components = [component]
const newSchema = () => SchemaName.makeUnsafe(`r_${randomBytes(5).toString("hex")}`)

/** A session that cannot connect (nothing listens on the port). */
const unreachable = Layer.unwrap(Effect.map(ClosedPort.find, (closed) =>
  DbSession.layer({
    url: closed.url,
    connectTimeout: "1 second",
    poolClass: "null",
    poolSize: 1,
    driver: "pg"
  })))

describe("SchemaMigration", () => {
  it.effect(
    "unreachable: not ready, fails fast with the database's reason, checks again only after a jittered sleep",
    () =>
      Effect.gen(function*() {
        const messages: Array<string> = []
        const migration = yield* SchemaMigration.start({ schema: newSchema(), components, migrate: true }).pipe(
          Effect.provide(Logger.layer([Logger.make((entry) => messages.push(String(entry.message)))]))
        )
        // the first check runs at once (real I/O, real time: the TestClock stands still); wait until it has failed
        yield* Eventually.until(
          "the first check's failure",
          Effect.map(migration.status, (status) => status._tag !== "Starting")
        )
        const status = yield* migration.status
        assert.strictEqual(status._tag, "Waiting")
        const error = yield* Effect.flip(migration.ensure)
        assert.strictEqual(error._tag, "DatabaseUnavailable")
        assert.strictEqual(error._tag === "DatabaseUnavailable" ? error.reason : "", "Unreachable")
        assert.match(
          messages.join("\n"),
          /database unavailable \(Unreachable\); retrying in \d+\.\d s \(.*ECONNREFUSED.*\)/
        )
        // the first sleep is the base interval jittered by ±50 %: nothing before 0.5 s
        const before = messages.length
        yield* TestClock.adjust("499 millis")
        assert.strictEqual(messages.length, before, "no second check within 0.5 s")
      }).pipe(Effect.provide(unreachable)),
    30_000
  )

  /**
   * Waits for `fiber`, moving this test's clock a second at a time until it is done (`Eventually.advancing`): the
   * instances' checks read the real database, and their sleeps start on the test clock only once a check has answered.
   */
  const driven = <A, E>(what: string, fiber: Fiber.Fiber<A, E>) =>
    Effect.andThen(
      Eventually.advancing(what, Effect.sync(() => fiber.pollUnsafe() !== undefined), { step: "1 second" }),
      Fiber.join(fiber)
    )

  layer(Database)((it) => {
    it.effect(
      "instances starting together migrate once; a non-migrating one waits for them",
      () =>
        Effect.gen(function*() {
          const schema = newSchema()
          const messages: Array<string> = []
          const capture = Logger.layer([Logger.make((entry) => messages.push(String(entry.message)))])
          const waiting = yield* SchemaMigration.start({ schema, components, migrate: false }).pipe(
            Effect.provide(capture)
          )
          const pending = yield* Migrator.pending(schema, components)
          assert.strictEqual(pending, component.migrations.length)
          const migrating = yield* Effect.all(
            Array.from({ length: 4 }, () => SchemaMigration.start({ schema, components, migrate: true })),
            { concurrency: "unbounded" }
          ).pipe(Effect.provide(capture), Effect.provideService(References.MinimumLogLevel, "Info"))
          // an attempt that failed on a loaded machine (a check or a connection) retries after a sleep on this clock
          yield* driven(
            "the migrating instances to be ready",
            yield* Effect.forkChild(
              Effect.all(migrating.map((migration) => migration.await), { concurrency: "unbounded" })
            )
          )
          assert.strictEqual(messages.filter((message) => message === "migrations applied").length, 1)
          assert.strictEqual(yield* Migrator.pending(schema, components), 0)
          // the waiting instance sees it on its next check (after its jittered sleep)
          yield* driven("the waiting instance to see the migrations applied", yield* Effect.forkChild(waiting.await))
          assert.strictEqual((yield* waiting.status)._tag, "Ready")
          yield* waiting.ensure
        }),
      { timeout: 60_000 }
    )

    it.effect(
      "as a service: the layer starts the migration, the accessors read it, release stops it",
      () =>
        Effect.gen(function*() {
          const schema = newSchema()
          yield* Effect.scoped(Effect.gen(function*() {
            const context = yield* Layer.build(SchemaMigration.layer({ schema, components, migrate: true }))
            const provided = <A, E>(effect: Effect.Effect<A, E, SchemaMigration.SchemaMigration>) =>
              Effect.provideContext(effect, context)
            yield* provided(SchemaMigration.awaitReady)
            yield* provided(SchemaMigration.ensure)
            assert.strictEqual((yield* provided(SchemaMigration.status))._tag, "Ready")
          }))
          assert.strictEqual(yield* Migrator.pending(schema, components), 0)
        }),
      { timeout: 60_000 }
    )

    it.effect("a misconfigured database stops the attempts with an error naming it", () =>
      Effect.gen(function*() {
        const database = yield* TestDatabase
        const url = new URL(database.url)
        url.password = "wrong-password"
        const migration = yield* SchemaMigration.start({ schema: newSchema(), components, migrate: true }).pipe(
          Effect.provide(DbSession.layer({
            url: url.toString(),
            connectTimeout: "2 seconds",
            poolClass: "null",
            poolSize: 1,
            driver: "pg"
          }))
        )
        const error = yield* Effect.flip(migration.await)
        assert.strictEqual(error._tag, "SchemaMisconfigured")
        assert.include(error.message, "password authentication failed")
        assert.strictEqual((yield* migration.status)._tag, "Misconfigured")
      }), { timeout: 60_000 })
  })
})
