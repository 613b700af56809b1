/**
 * The faults a managed PostgreSQL really has, against a real server through the deriver's public entry point:
 * the database turns read-only (as right after a failover: every write fails with 25006) while items are
 * pending and handlers write. Counts items enqueued, processed, errored and handled more than once, and the
 * log lines written at WARN and ERROR.
 *
 * Issue #22: the test's own polls (`eventually`, every 50 ms) go through a one-connection session of their own
 * (`Polls`) instead of the deriver's `null` session, on which each poll opened a connection.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { TableLock, TestDatabase } from "@resilience/test-db"
import { Context, Effect, Exit, Layer, Logger, References, Scope } from "effect"
import * as Deriver from "../../src/Deriver.ts"
import * as Handlers from "../../src/Handlers.ts"
import * as Queue from "../../src/Queue.ts"
import { count, eventually, freshSchema, testConfig } from "../support.ts"

interface Logged {
  readonly level: string
  readonly message: string
}
const logged: Array<Logged> = []
const capture = Logger.make((options) => {
  logged.push({ level: options.logLevel, message: String(options.message) })
})

/** A fresh session per checkout (null pool), so a database-level setting reaches every statement at once. */
const Database = TestDatabase.layerWith((database) =>
  DbSession.layer({
    url: database.url,
    connectTimeout: "2 seconds",
    poolClass: "null",
    poolSize: 1,
    driver: "pg",
    applicationName: "deriver-faults"
  })
).pipe(
  Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Warn")),
  Layer.provideMerge(Logger.layer([capture])),
  Layer.orDie
)

/** The test's own polls: one kept connection on the same database (not the deriver's application name). */
class Polls extends Context.Service<Polls, Context.Context<DbSession>>()("test/Faults/Polls") {}
const PollsLayer = Layer.effect(
  Polls,
  Effect.gen(function*() {
    const database = yield* TestDatabase
    return yield* Layer.build(DbSession.layer({
      url: database.url,
      connectTimeout: "2 seconds",
      poolClass: "queue",
      poolSize: 1,
      driver: "pg",
      applicationName: "deriver-faults-polls"
    }))
  })
).pipe(Layer.orDie)

/** `eventually` on the test's own connection. */
const polled = <E>(check: Effect.Effect<boolean, E, DbSession>, timeoutMillis?: number) =>
  Effect.gen(function*() {
    const polls = yield* Polls
    return yield* eventually(Effect.provide(check, polls), timeoutMillis)
  })

const withScope = <A, E, R>(body: (scope: Scope.Closeable) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(Scope.make(), body, (scope, exit) => Scope.close(scope, exit))

/** Turns the suite's database read-only for new sessions (or back); this session opts out first to be allowed. */
const setReadOnly = (on: boolean) =>
  Effect.gen(function*() {
    const database = yield* TestDatabase
    const db = yield* DbSession
    yield* db.withConnection((c) =>
      Effect.andThen(
        c.query("SET default_transaction_read_only = off"),
        c.query(`ALTER DATABASE ${database.database} SET default_transaction_read_only = ${on}`)
      )
    )
  }).pipe(Effect.orDie)

/** Backends of the deriver's session waiting on a lock right now. */
const waitingOnLock = count(
  "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'deriver-faults' AND wait_event_type = 'Lock'"
)

layer(PollsLayer.pipe(Layer.provideMerge(Database)), { excludeTestServices: true, timeout: "120 seconds" })(
  "Deriver under faults (PostgreSQL)",
  (it) => {
    it.effect("read-only for seconds while items are pending: nothing errored, nothing lost, one WARN", () =>
      Effect.gen(function*() {
        const db = yield* DbSession
        const schema = yield* freshSchema
        const effects = SchemaName.qualify(schema, "effects")
        yield* db.query(`CREATE TABLE ${effects} (item_id bigint NOT NULL)`)
        const units = Array.from({ length: 6 }, (_, i) => `unit-${i}`)
        const items = Array.from(
          { length: 8 },
          () => units.map((workUnitKey) => ({ workUnitKey, taskType: "write", payload: {} }))
        )
          .flat()
        const enqueued = yield* db.withConnection((c) => Queue.enqueue(c, schema, items))
        // The handler's side effect is a write: it fails with 25006 while the database is read-only.
        const handler: Handlers.Handler = (item) =>
          Effect.gen(function*() {
            yield* Effect.sleep("30 millis") // the handler's own work, part of the scenario
            yield* db.query(`INSERT INTO ${effects} (item_id) VALUES ($1)`, [item.id])
          })
        const config = yield* testConfig({ workers: 3, pollingSleepMaxIntervalSeconds: 0.3 })
        logged.length = 0
        yield* withScope((scope) =>
          Effect.gen(function*() {
            yield* Scope.provide(
              Deriver.start({ schema, handlers: Handlers.make({ write: handler }), config, owner: "a" }),
              scope
            )
            yield* polled(Effect.map(count(`SELECT count(*) FROM ${effects}`), (n) => n >= 5))
            yield* setReadOnly(true)
            yield* Effect.sleep("3 seconds") // the fault itself: 3 s read-only is the scenario
            yield* setReadOnly(false)
            yield* polled(
              Effect.map(
                count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`),
                (n) => n === 0
              )
            )
          })
        )
        const processed = yield* count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE processed`)
        const errored = yield* count(
          `SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE error IS NOT NULL`
        )
        const handledTwice = yield* count(
          `SELECT count(*) FROM (SELECT item_id FROM ${effects} GROUP BY item_id HAVING count(*) > 1) AS twice`
        )
        const warnings = logged.filter((entry) => entry.level === "Warn")
        const errors = logged.filter((entry) => entry.level === "Error" || entry.level === "Fatal")
        yield* Effect.logInfo("read-only figures").pipe(
          Effect.annotateLogs({ enqueued, processed, errored, handledTwice, warnings: warnings.length })
        )
        console.log(
          `[figures] read-only 3 s: enqueued=${enqueued} processed=${processed} errored=${errored} handled>1=${handledTwice} warn-lines=${warnings.length} error-lines=${errors.length}`
        )
        assert.strictEqual(processed, enqueued)
        assert.strictEqual(errored, 0)
        assert.deepStrictEqual(errors, [])
        // Once per change of state: the read-only condition is reported once (a second kind may appear if a
        // statement was cut between conditions), not once per poll over three seconds of polling.
        assert.isAtLeast(warnings.length, 1)
        assert.isAtMost(warnings.length, 3)
      }))

    it.effect("a poll stuck behind a lock: shutdown completes within its grace and the poll is cancelled", () =>
      Effect.gen(function*() {
        const database = yield* TestDatabase
        const schema = yield* freshSchema
        // The default statement timeout (30 s) is far away: only the interruption can end the poll in time.
        const config = yield* testConfig({ shutdownGraceSeconds: 2 })
        const shutdownMillis = yield* Effect.scoped(Effect.gen(function*() {
          yield* TableLock.hold(database.url, SchemaName.qualify(schema, "queue"))
          const scope = yield* Scope.make()
          yield* Scope.provide(Deriver.start({ schema, handlers: Handlers.make({}), config, owner: "stuck" }), scope)
          yield* polled(Effect.map(waitingOnLock, (n) => n >= 1))
          const started = Date.now()
          yield* Scope.close(scope, Exit.void)
          const millis = Date.now() - started
          // Cancelled on the server while the lock is still held: nothing of ours waits on it any more.
          yield* polled(Effect.map(waitingOnLock, (n) => n === 0), 5_000)
          return millis
        }))
        console.log(`[figures] poll stuck behind a lock: shutdown took ${shutdownMillis} ms (grace 2000 ms)`)
        assert.isBelow(shutdownMillis, 2_000)
      }))

    it.effect("history retention: the running deriver deletes processed items past the window, not pending ones", () =>
      Effect.gen(function*() {
        const db = yield* DbSession
        const schema = yield* freshSchema
        const queue = SchemaName.qualify(schema, "queue")
        const items = Array.from(
          { length: 20 },
          (_, i) => ({ workUnitKey: `u-${i % 4}`, taskType: "noop", payload: {} })
        )
        yield* db.withConnection((c) => Queue.enqueue(c, schema, items))
        // One unit that no handler can finish while the deriver runs: its items must survive the retention.
        yield* db.withConnection((c) =>
          Queue.enqueue(c, schema, [{ workUnitKey: "held", taskType: "noop", payload: {} }])
        )
        yield* db.query(`INSERT INTO ${SchemaName.qualify(schema, "active_queue_sessions")} (work_unit_key, owner)
        VALUES ('held', 'someone-alive')`)
        const config = yield* testConfig({
          historyRetentionHours: 1 / 3600,
          staleWorkUnitCleanupIntervalSeconds: 0.2
        })
        yield* withScope((scope) =>
          Effect.gen(function*() {
            yield* Scope.provide(
              Deriver.start({ schema, handlers: Handlers.make({ noop: () => Effect.void }), config, owner: "r" }),
              scope
            )
            yield* polled(Effect.map(count(`SELECT count(*) FROM ${queue} WHERE processed`), (n) => n === 20))
            // Processed a moment ago; past the 1 s window the maintenance deletes them.
            yield* polled(Effect.map(count(`SELECT count(*) FROM ${queue}`), (n) => n === 1), 15_000)
          })
        )
        assert.strictEqual(yield* count(`SELECT count(*) FROM ${queue} WHERE NOT processed`), 1)
      }))
  }
)
