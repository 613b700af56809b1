/**
 * Issue #47, recovery on evidence: a busy deriver (8 workers, the production schedule) whose server stops just as
 * it finishes 20 units (their records in flight) for `downSeconds`, and starts again on the same data and port;
 * then a write commits and wakes the deriver, as the API does after each write. The item must be processed within
 * 2 s of that write: the committed write is evidence that the database answers, so the checkout gate's circuit lets
 * the waiting workers' records through as its probe at once (`CheckoutGate.evidence`), and the woken poll claims.
 * Before that, with the `null` pool, the workers waited for the circuit's next window with every unit held, and
 * the item waited 14.4 s. With the `queue` pool, the item waited 1.0–19.2 s in 7 runs of 10: every checkout whose
 * attempt waited for the circuit held a slot of the pool meanwhile, so the others (the woken poll's among them)
 * waited out "no free connection in the in-process pool (size 9)" until the circuit closed; a checkout now takes
 * its slot for the attempt only once the circuit lets it through.
 */
import { assert, describe, it } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Eventually } from "@resilience/test-db"
import { Effect, Exit, Layer, References, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Deriver from "../../src/Deriver.ts"
import * as DeriverConfig from "../../src/DeriverConfig.ts"
import * as Handlers from "../../src/Handlers.ts"
import * as Queue from "../../src/Queue.ts"
import * as QueueSchema from "../../src/QueueSchema.ts"

const schema = SchemaName.makeUnsafe("tenant")
const downSeconds = 20

const session = (url: string, applicationName: string, poolClass: "null" | "queue") =>
  DbSession.layer({ url, connectTimeout: "2 seconds", poolClass, poolSize: 9, driver: "pg", applicationName })

const recovery = (poolClass: "null" | "queue") =>
  Effect.gen(function*() {
    const directory = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "resilience-recovery-"))),
      (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
    )
    const port = yield* Cluster.freePort
    const startCluster = Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(Scope.provide(Cluster.start({ directory, port, maxConnections: 40 }), scope), (cluster) => ({
        cluster,
        scope
      })))
    let running = yield* startCluster
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() =>
        Scope.close(running.scope, Exit.void)
      )
    )
    const url = running.cluster.url
    const admin = yield* Layer.build(session(url, "admin", "null"))
    yield* Migrator.run(schema, [QueueSchema.component]).pipe(Effect.provide(admin))
    const processed = new Map<string, number>()
    const handlers = Handlers.make({
      work: (item) => Effect.sync(() => processed.set(item.id, performance.now()))
    })
    const config = yield* Effect.orDie(DeriverConfig.make({
      workers: 8,
      pollingStartupJitterSeconds: 0,
      pollingInitialInterval: "max"
    }))
    const polls: Array<{ readonly at: number; readonly outcome: string }> = []
    const deriver = yield* Deriver.start({
      schema,
      handlers,
      config,
      observer: (event) =>
        Effect.sync(() => {
          if (event._tag === "Polled") polls.push({ at: performance.now(), outcome: event.outcome })
        })
    }).pipe(Effect.provide(yield* Layer.build(session(url, "deriver", poolClass))))
    yield* Eventually.until("the deriver's first poll", Effect.sync(() => polls.length > 0))
    // a busy deriver: work just drained, so its schedule is at the base and its polls fail through the outage
    yield* Effect.gen(function*() {
      const db = yield* DbSession
      yield* db.withConnection((c) =>
        Queue.enqueue(
          c,
          schema,
          Array.from({ length: 20 }, (_, i) => ({ workUnitKey: `before-${i}`, taskType: "work", payload: {} }))
        )
      )
    }).pipe(Effect.provide(admin), Effect.orDie)
    yield* deriver.wake
    yield* Eventually.until(
      () => `20 items processed (${processed.size} so far)`,
      Effect.sync(() => processed.size >= 20),
      { every: "10 millis" }
    )
    processed.clear()
    // the outage: the server stopped (fast shutdown) and started again on the same data and port
    yield* Scope.close(running.scope, Exit.void)
    yield* Effect.sleep(`${downSeconds} seconds`) // the outage itself: its length is the scenario
    running = yield* startCluster
    // the first write after the outage, and its wake
    const written = yield* Effect.gen(function*() {
      const db = yield* DbSession
      return yield* db.withConnection((c) =>
        Queue.enqueue(c, schema, [{ workUnitKey: "after", taskType: "work", payload: {} }])
      )
    }).pipe(Effect.provide(admin), Effect.retry({ times: 50 }), Effect.orDie)
    assert.strictEqual(written, 1)
    const wroteAt = performance.now()
    const decision = yield* deriver.wake
    yield* Eventually.until("the first write after the outage processed", Effect.sync(() => processed.size > 0), {
      within: "40 seconds",
      every: "10 millis"
    })
    const tookMillis = [...processed.values()][0]! - wroteAt
    console.log(
      `recovery on evidence (${poolClass} pool): the first write after a ${downSeconds} s restart processed ` +
        `${tookMillis.toFixed(0)} ms after it (wake: ${decision}); polls after the restart: ${
          polls.filter((poll) => poll.at > wroteAt - downSeconds * 1000).map((poll) =>
            `${((poll.at - wroteAt) / 1000).toFixed(2)} s ${poll.outcome}`
          ).join(", ")
        }`
    )
    return tookMillis
  }).pipe(Effect.scoped, Effect.provide(Layer.succeed(References.MinimumLogLevel, "Error")))

describe("recovery on evidence (dedicated cluster, real time)", () => {
  for (const poolClass of ["queue", "null"] as const) {
    it.live(
      `DB_POOL_CLASS=${poolClass}: the first write after a ${downSeconds} s restart is processed within 2 s`,
      () =>
        Effect.gen(function*() {
          const tookMillis = yield* recovery(poolClass)
          assert.isBelow(tookMillis, 2_000)
        }),
      { timeout: 120_000 }
    )
  }
})
