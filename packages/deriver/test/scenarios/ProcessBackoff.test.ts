/**
 * The whole process backs off, not only its poll loop: a deriver with 8 workers and 200 pending items is cut
 * off by a saturation of its server (every new connection refused; the deriver's backends killed but one, so an
 * in-process pool keeps one connection). Its connection attempts, counted by a TCP proxy in front of the
 * server, stay within what its poll schedule alone would make (plus the checkouts that can be under way at
 * once when the window began), with both pool classes; with `queue` it keeps working on the connection it has.
 *
 * The production schedule (base 1 s, ×2, max 30 s, jitter 0.5) against a 30 s window, scaled by 1/10 (issue
 * #22): base 0.1 s, max 3 s, a 3 s window. The checkout gate's windows derive from the poll settings
 * (`DeriverConfig.derived`), so they scale with them, and the bound is computed from the scaled schedule the
 * same way: the same 6 polls at the shortest jittered sleeps, a tenth of the time apart.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Migrator } from "@resilience/schema"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, Eventually } from "@resilience/test-db"
import { Context, Effect, Exit, Layer, References, Scope } from "effect"
import pg from "pg"
import * as Deriver from "../../src/Deriver.ts"
import * as DeriverConfig from "../../src/DeriverConfig.ts"
import * as Handlers from "../../src/Handlers.ts"
import * as Queue from "../../src/Queue.ts"
import * as QueueSchema from "../../src/QueueSchema.ts"

class Server extends Context.Service<Server, Cluster.Cluster>()("test/ProcessBackoff/Server") {
  static readonly layer = Layer.effect(Server, Cluster.start({ maxConnections: 20 }))
}

const workers = 8 // the setting
/** The production poll schedule scaled by 1/10: base 0.1 s, ×2 (the default), max 3 s, jitter ratio 0.5. */
const schedule = { baseSeconds: 0.1, maxSeconds: 3, multiplier: 2, ratio: 0.5 }
/** The production test's 30 s window, scaled the same way. */
const windowSeconds = 3

/**
 * Connection attempts the poll schedule alone makes in `seconds` of failures at its shortest jittered sleeps
 * (each interval × (1 − ratio)): polls at 0, 0.05, 0.15, 0.35, 0.75, 1.55 s (production: ×10).
 */
const pollScheduleAttempts = (seconds: number) => {
  let t = 0
  let interval = schedule.baseSeconds
  let attempts = 0
  while (t <= seconds) {
    attempts += 1
    t += interval * (1 - schedule.ratio)
    interval = Math.min(interval * schedule.multiplier, schedule.maxSeconds)
  }
  return attempts
}

/** A saturation window against a deriver whose checkouts go through a counting proxy. */
const saturationWindow = (poolClass: "null" | "queue") =>
  Effect.gen(function*() {
    const cluster = yield* Server
    const proxy = yield* CountingProxy.start({ host: "127.0.0.1", port: Number(new URL(cluster.url).port) })
    const application = `deriver-backoff-${poolClass}`
    const schema = SchemaName.makeUnsafe(`backoff_${poolClass}`)
    const session = DbSession.layer({
      url: proxy.url(cluster.url),
      connectTimeout: "1 second",
      poolClass,
      poolSize: 10,
      driver: "pg",
      applicationName: application
    })
    const admin = new pg.Client({ connectionString: cluster.url, application_name: "admin" })
    yield* Effect.promise(() => admin.connect())
    yield* Effect.addFinalizer(() => Effect.promise(() => admin.end()))
    const count = (sql: string) => Effect.promise(async () => ((await admin.query(sql)).rows[0] as { n: number }).n)
    yield* Effect.promise(() => admin.query(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`))

    return yield* Effect.gen(function*() {
      const db = yield* DbSession
      yield* Migrator.run(schema, [QueueSchema.component])
      yield* db.withConnection((c) =>
        Queue.enqueue(
          c,
          schema,
          Array.from({ length: 200 }, (_, i) => ({ workUnitKey: `unit-${i % 40}`, taskType: "work", payload: {} }))
        )
      )
      const processed = count(
        `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE processed`
      )
      // The production schedule scaled (base 0.1 s, max 3 s, jitter 0.5); startup jitter off; a 1 s shutdown
      // grace (the stop comes after the count: units stuck behind the circuit need not finish); the rest defaults.
      const config = yield* Effect.orDie(DeriverConfig.make({
        workers,
        pollingSleepIntervalSeconds: schedule.baseSeconds,
        pollingSleepMaxIntervalSeconds: schedule.maxSeconds,
        pollingBackoffMultiplier: schedule.multiplier,
        pollingJitterRatio: schedule.ratio,
        pollingStartupJitterSeconds: 0,
        shutdownGraceSeconds: 1
      }))
      // the handler's own work, part of the scenario
      const handlers = Handlers.make({ work: () => Effect.sleep("300 millis") })
      const scope = yield* Scope.make()
      yield* Scope.provide(Deriver.start({ schema, handlers, config }), scope)
      yield* Eventually.satisfying("16 items processed", processed, (n) => n >= 16, { every: "50 millis" })

      // Saturate: kill the deriver's backends but one, and hold every slot (patience: take those freed too).
      yield* Effect.promise(() =>
        admin.query(
          `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
           WHERE application_name = $1 AND pid <> (SELECT min(pid) FROM pg_stat_activity WHERE application_name = $1)`,
          [application]
        )
      )
      const saturation = yield* Saturation.hold(cluster.url, { applicationName: "saturator", patience: "1 second" })
        .pipe(Effect.orDie)
      const attemptsBefore = yield* proxy.attempts
      const processedBefore = yield* processed
      // the window itself: the attempts within it are what the schedule bounds
      yield* Effect.sleep(`${windowSeconds} seconds`)
      const attempts = (yield* proxy.attempts) - attemptsBefore
      const processedDuring = (yield* processed) - processedBefore
      yield* Effect.orDie(saturation.release)
      yield* Scope.close(scope, Exit.void)
      return { attempts, processedDuring, held: saturation.held, refusal: saturation.refusal.code }
    }).pipe(Effect.provide(session))
  })

const Suite = Server.layer.pipe(Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error")))

layer(Suite, { excludeTestServices: true, timeout: "120 seconds" })("Process back-off (counting proxy)", (it) => {
  for (const poolClass of ["queue", "null"] as const) {
    it.effect(`DB_POOL_CLASS=${poolClass}: attempts during a ${windowSeconds} s saturation follow the poll schedule`, () =>
      Effect.gen(function*() {
        const result = yield* Effect.scoped(saturationWindow(poolClass))
        console.log(JSON.stringify({ poolClass, ...result, schedule: pollScheduleAttempts(windowSeconds) }))
        assert.isAbove(result.held, 0, "the server was saturated")
        assert.strictEqual(result.refusal, "53300", "the next connection was refused")
        // The poll schedule's own attempts, plus the checkouts that can be making an attempt at once when the
        // window begins (one per worker and the poller): after that the process's attempts follow its circuit,
        // one schedule per process, not one stream per worker. Measured at production settings (30 s) since
        // attempts (not checkouts) go through the circuit: 4 (queue) and 5 (null); before, with the circuit on
        // checkouts, up to 26 (queue: answers on the kept connection closed it) and 13 (null); without a gate 17
        // (queue) and 32 (null).
        const bound = pollScheduleAttempts(windowSeconds) + workers + 1
        assert.isAtMost(result.attempts, bound, `attempts in ${windowSeconds} s: ${result.attempts}`)
        if (poolClass === "queue") {
          assert.isAbove(result.processedDuring, 0, "the pool kept working on the connection it had")
        }
      }))
  }
})
