/**
 * Shared pieces of the PostgreSQL suites: a DbSession on the suite's own database, fresh schemas, a small
 * deriver configuration and polling helpers.
 */
import { DbSession } from "@resilience/db-session"
import { Migrator } from "@resilience/schema"
import { SchemaName } from "@resilience/schema"
import { type TestDatabase, TestSession } from "@resilience/test-db"
import { Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

/** A session on a fresh database of the shared test server (in-process pool, for speed). */
export const Database: Layer.Layer<DbSession | TestDatabase> = TestSession.layer(DbSession.layer, {
  applicationName: "deriver-test"
})
  .pipe(Layer.orDie)

/** A new, migrated schema with a random name. */
export const freshSchema = Effect.gen(function*() {
  const schema = SchemaName.makeUnsafe(`t_${randomBytes(5).toString("hex")}`)
  yield* Migrator.run(schema, [QueueSchema.component])
  return schema
})

/** A deriver configuration with short intervals for tests. */
export const testConfig = (input: DeriverConfig.Input = {}) =>
  Effect.orDie(DeriverConfig.make({
    workers: 4,
    pollingSleepIntervalSeconds: 0.02,
    pollingSleepMaxIntervalSeconds: 0.2,
    pollingStartupJitterSeconds: 0,
    pollingJitterRatio: 0.5,
    shutdownGraceSeconds: 5,
    batchSize: 5,
    ...input
  }))

/** Polls `check` every 50 ms until it returns true (at most `timeoutMillis`). */
export const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, timeoutMillis = 60_000) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMillis
    while (Date.now() < deadline) {
      if (yield* check) return
      yield* Effect.sleep("50 millis")
    }
    return yield* Effect.die(new Error(`condition not met within ${timeoutMillis} ms`))
  })

/** A single count(*) query. */
export const count = (sql: string, params: ReadonlyArray<unknown> = []) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const rows = yield* db.query<{ n: number }>(`SELECT (${sql})::int AS n`, params)
    return rows[0]?.n ?? 0
  })
