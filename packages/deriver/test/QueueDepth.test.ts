/**
 * The queue's depth gauges against a real queue: `Queue.depth` counts live items by state (due, waiting for their
 * time) and leaves out dead letters and processed items, stops at its cap, and names when the oldest due item
 * became due; a running deriver samples it in its cleanup round into `deriver_queue_depth{state}` and
 * `deriver_queue_oldest_pending_age_seconds`, and samples again on the next round; a sample the server refuses is
 * logged at debug and skipped while the round's claims go on.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { TestDatabase } from "@resilience/test-db"
import { Effect, Exit, Layer, Logger, Metric, References, Scope } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { randomBytes } from "node:crypto"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverMetrics from "../src/DeriverMetrics.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as Handlers from "../src/Handlers.ts"
import * as Maintenance from "../src/Maintenance.ts"
import { Database, eventually, freshSchema, testConfig } from "./support.ts"

const enqueue = (schema: SchemaName.SchemaName, items: ReadonlyArray<Enqueue.NewItem>) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.withConnection((c) => Enqueue.enqueue(c, schema, items))
  })

const depth = (schema: SchemaName.SchemaName, cap: number) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.withConnection((c) => Maintenance.depth(c, schema, cap))
  })

const gauge = (metric: Metric.Gauge<number>) => Effect.map(Metric.value(metric), (state) => state.value)

layer(Database, { excludeTestServices: true })("Queue depth (PostgreSQL)", (it) => {
  it.effect("counts due and waiting live items, not dead letters nor processed ones; stops at the cap", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const queue = SchemaName.qualify(schema, "queue")
      const now = Date.now()
      const dueSince = now - 60_000
      yield* enqueue(schema, [
        { workUnitKey: "a", taskType: "t", payload: 1 },
        { workUnitKey: "a", taskType: "t", payload: 2 },
        { workUnitKey: "b", taskType: "t", payload: 3 },
        { workUnitKey: "c", taskType: "t", payload: 4, runAt: dueSince },
        { workUnitKey: "d", taskType: "t", payload: 5, runAt: now + 3_600_000 },
        { workUnitKey: "e", taskType: "t", payload: 6, runAt: now + 7_200_000 },
        { workUnitKey: "f", taskType: "dead", payload: 7 },
        { workUnitKey: "g", taskType: "done", payload: 8 }
      ])
      // a dead letter as `Queue.record` leaves one, and a processed item
      yield* db.query(`UPDATE ${queue} SET dead_at = now(), run_at = 'infinity' WHERE task_type = 'dead'`)
      yield* db.query(`UPDATE ${queue} SET processed = true WHERE task_type = 'done'`)

      const sampled = yield* depth(schema, 1000)
      assert.strictEqual(sampled.due, 4, "a1, a2, b and the timed c whose time has come")
      assert.strictEqual(sampled.waiting, 2, "d and e wait for their time")
      assert.isNotNull(sampled.oldestDueAt)
      assert.approximately(sampled.oldestDueAt!, dueSince, 1, "c has been due for a minute: older than a's creation")

      const capped = yield* depth(schema, 2)
      assert.deepStrictEqual([capped.due, capped.waiting], [2, 2], "each count stops at the cap")

      // nothing due: no oldest, the waiting ones still counted
      yield* db.query(`UPDATE ${queue} SET processed = true WHERE run_at IS NULL OR run_at <= now()`)
      const later = yield* depth(schema, 1000)
      assert.deepStrictEqual(later, { due: 0, waiting: 2, oldestDueAt: null })
    }))

  it.effect("a deriver samples the gauges in its cleanup round, and again on the next round", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      // sentinels: only a sample of this deriver's queue sets these values
      yield* Metric.update(DeriverMetrics.queueDepthBy.due, -1)
      yield* Metric.update(DeriverMetrics.queueDepthBy.waiting, -1)
      yield* Metric.update(DeriverMetrics.queueOldestPendingAge, -1)
      const enqueuedAt = Date.now()
      // unit u's first item holds its worker forever, so u's items stay unprocessed; w waits an hour
      yield* enqueue(schema, [
        { workUnitKey: "u", taskType: "hold", payload: 1 },
        { workUnitKey: "u", taskType: "hold", payload: 2 },
        { workUnitKey: "w", taskType: "hold", payload: 3, runAt: enqueuedAt + 3_600_000 }
      ])
      const config = yield* testConfig({ staleWorkUnitCleanupIntervalSeconds: 0.2, shutdownGraceSeconds: 0.5 })
      const handlers = Handlers.make({ hold: () => Effect.never })
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      yield* Scope.provide(Deriver.start({ schema, handlers, config }), scope)

      yield* eventually(Effect.map(gauge(DeriverMetrics.queueDepthBy.due), (due) => due === 2), 15_000)
      assert.strictEqual(yield* gauge(DeriverMetrics.queueDepthBy.waiting), 1)
      const age = yield* gauge(DeriverMetrics.queueOldestPendingAge)
      assert.isAtLeast(age, 0)
      assert.isAtMost(age, (Date.now() - enqueuedAt) / 1000 + 1, "u's first item, due since it was enqueued")

      // three more behind u's held item: the next round sees five due, and the oldest has aged
      yield* enqueue(schema, [3, 4, 5].map((n) => ({ workUnitKey: "u", taskType: "hold", payload: n })))
      yield* eventually(Effect.map(gauge(DeriverMetrics.queueDepthBy.due), (due) => due === 5), 15_000)
      yield* eventually(Effect.map(gauge(DeriverMetrics.queueOldestPendingAge), (later) => later > age), 15_000)

      const text = yield* PrometheusMetrics.format()
      assert.match(text, /deriver_queue_depth\{state="due"\} 5/)
      assert.match(text, /deriver_queue_depth\{state="waiting"\} 1/)
      assert.match(text, /deriver_queue_oldest_pending_age_seconds \d/)
    }).pipe(Effect.scoped))

  it.effect("a sample the server refuses is skipped: logged at debug, the gauges kept, the round's claim goes on", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const database = yield* TestDatabase
      // The deriver connects as a role that may use the queue but not `extract(epoch FROM timestamptz)`, which only
      // the depth sample calls (in this suite's own database; a superuser is not bound by privileges).
      const role = `depth_${randomBytes(4).toString("hex")}`
      const password = randomBytes(12).toString("hex")
      const extract = "pg_catalog.extract(text, timestamp with time zone)"
      const quoted = SchemaName.quote(schema)
      yield* db.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`)
      yield* Effect.addFinalizer(() =>
        Effect.orDie(Effect.gen(function*() {
          yield* db.query(`GRANT EXECUTE ON FUNCTION ${extract} TO PUBLIC`)
          yield* db.query(`DROP OWNED BY ${role}`)
          yield* db.query(`DROP ROLE ${role}`)
        }))
      )
      yield* db.query(`GRANT USAGE ON SCHEMA ${quoted} TO ${role}`)
      yield* db.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${quoted} TO ${role}`)
      yield* db.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${quoted} TO ${role}`)
      yield* db.query(`REVOKE EXECUTE ON FUNCTION ${extract} FROM PUBLIC`)
      const url = new URL(database.url)
      url.username = role
      url.password = password
      const limited = DbSession.layer({
        url: url.toString(),
        connectTimeout: "2 seconds",
        poolClass: "queue",
        poolSize: 4,
        driver: "pg",
        applicationName: "deriver-depth-refused"
      })

      const logged: Array<{ readonly level: string; readonly message: string }> = []
      const capture = Logger.make((options) => {
        logged.push({ level: options.logLevel, message: String(options.message) })
      })
      const skipped = () => logged.filter((line) => line.message.includes("could not sample the queue's depth"))

      yield* Metric.update(DeriverMetrics.queueDepthBy.due, -1)
      yield* Metric.update(DeriverMetrics.queueOldestPendingAge, -1)
      yield* enqueue(schema, [1, 2, 3].map((n) => ({ workUnitKey: `k${n}`, taskType: "quick", payload: n })))
      const processed = () =>
        Effect.map(
          db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE processed`
          ),
          (rows) => rows[0]?.n ?? 0
        )
      const config = yield* testConfig({ staleWorkUnitCleanupIntervalSeconds: 0.2, shutdownGraceSeconds: 0.5 })
      const scope = yield* Scope.make()
      yield* Effect.addFinalizer(() => Scope.close(scope, Exit.void))
      yield* Scope.provide(
        Deriver.start({ schema, handlers: Handlers.make({ quick: () => Effect.void }), config }),
        scope
      ).pipe(
        Effect.provide(Layer.mergeAll(
          limited,
          Logger.layer([capture]),
          Layer.succeed(References.MinimumLogLevel, "Debug")
        ))
      )

      yield* eventually(Effect.map(processed(), (n) => n === 3), 15_000)
      yield* eventually(Effect.sync(() => skipped().length >= 2), 15_000)
      assert.deepStrictEqual([...new Set(skipped().map((line) => line.level))], ["Debug"])
      assert.strictEqual(yield* gauge(DeriverMetrics.queueDepthBy.due), -1, "a skipped sample leaves the gauge")
      assert.strictEqual(yield* gauge(DeriverMetrics.queueOldestPendingAge), -1)

      // allowed again: the next round samples (nothing due is left)
      yield* db.query(`GRANT EXECUTE ON FUNCTION ${extract} TO PUBLIC`)
      yield* eventually(Effect.map(gauge(DeriverMetrics.queueDepthBy.due), (due) => due === 0), 15_000)
      assert.strictEqual(yield* gauge(DeriverMetrics.queueOldestPendingAge), 0)
    }).pipe(Effect.scoped))
})
