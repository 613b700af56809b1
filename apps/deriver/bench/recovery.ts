/**
 * Benchmark (not a test): how fast the deriver comes back after an outage (issue #20). For each pool class and
 * each `DERIVER_OVERLOAD_ENABLED`, a dedicated PostgreSQL runs the deriver app as its own process
 * (`apps/deriver/src/main.ts`) at the production defaults (base 1 s, max 30 s, jitter 0.5, startup jitter
 * 30 s) with 8 workers, reaching the server through a TCP proxy that counts its connection attempts. Once the
 * deriver polls, its backends are killed and the server is saturated (`Saturation.hold`: every slot held, the
 * next connection refused with 53300); meanwhile 200 single-message sessions are posted (200 single-item
 * `representation` units) on a connection kept from before. After the saturation the slots are released, and
 * the bench measures the time from the release to the first item processed and to all 200, the connection
 * attempts during the saturation, and the items errored. Saturation 0 is the reference: the same backlog
 * posted to an idle deriver, whose drain (all − first) is the drain at handler speed on this machine. Every run
 * has its own server; `BENCH_CONCURRENCY` (2: more loads a 2-core machine enough to skew the figures) run at once, the longest outages first.
 *
 *   npm run bench:recovery                                   # 0, 30, 120 and 300 s (about 35 minutes)
 *   BENCH_SATURATIONS=30 npm run bench:recovery -w @resilience/deriver-app
 *   BENCH_POOLS=null BENCH_OVERLOAD=true npm run bench:recovery -w @resilience/deriver-app
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbSession } from "@resilience/db-session"
import { Domain, Messages, Workspaces } from "@resilience/domain"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, EntryPoint } from "@resilience/test-db"
import { Effect, Layer, Logger, References } from "effect"
import { loadavg } from "node:os"
import { Setup } from "../../../packages/bench-kit/src/index.ts"

const saturations = Setup.list("BENCH_SATURATIONS", "0,30,120,300").map(Number)
const pools = Setup.list("BENCH_POOLS", "null,queue") as ReadonlyArray<"null" | "queue">
const overloads = Setup.list("BENCH_OVERLOAD", "true,false").map((value) => value === "true")
const units = Number(process.env.BENCH_UNITS ?? 200)
const workers = Number(process.env.BENCH_WORKERS ?? 8)
/** Runs at once (each a server and a deriver process). */
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 2)
/** How long after the release the bench waits for the backlog before it gives up on a run. */
const drainLimitSeconds = 300
const capSeconds = 30
/** Idle before the outage: longer than the startup delay (at most the cap). */
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 40)
const now = () => performance.now()
const seconds = (millis: number) => (millis / 1000).toFixed(1)
const load = () => loadavg().map((n) => n.toFixed(1)).join(" ")

interface Figures {
  readonly pool: "null" | "queue"
  readonly overload: boolean
  readonly saturationSeconds: number
  readonly held: number
  readonly attemptsDuring: number
  readonly firstAfterRelease: number | undefined
  readonly allAfterRelease: number | undefined
  readonly processed: number
  readonly errored: number
}

const label = (pool: string, overload: boolean, saturationSeconds: number) =>
  `[${pool} overload=${overload} ${saturationSeconds} s]`

/** One configuration through one saturation, on its own server. */
const run = (pool: "null" | "queue", overload: boolean, saturationSeconds: number) =>
  Effect.scoped(Effect.gen(function*() {
    const tag = label(pool, overload, saturationSeconds)
    const cluster = yield* Cluster.start({ maxConnections: 20 })
    const server = new URL(cluster.url)
    const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
    const schema = SchemaName.makeUnsafe("recovery")
    const application = "bench-recovery-deriver"
    // The bench's own connections, opened before the saturation and kept (an in-process pool keeps them).
    const admin = yield* Layer.build(DbSession.layer({
      url: cluster.url,
      connectTimeout: "30 seconds", // a loaded machine starts its backends slowly; the bench's own are not measured
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "bench-recovery-admin"
    }))
    const withAdmin = <A, E>(effect: Effect.Effect<A, E, DbSession>) => Effect.provide(effect, admin)
    const sql = <Row>(text: string, params: ReadonlyArray<unknown> = []) =>
      withAdmin(Effect.flatMap(Effect.service(DbSession), (db) => db.query<Row>(text, params))).pipe(Effect.orDie)
    yield* withAdmin(Domain.migrate(schema)).pipe(Effect.orDie)
    yield* withAdmin(Workspaces.create(schema, "bench")).pipe(Effect.orDie)
    // Two connections in the pool: one for the counts, one for the posts.
    yield* Effect.all([sql("SELECT pg_sleep(0.1)"), sql("SELECT pg_sleep(0.1)")], { concurrency: 2 })
    const counts = sql<{ processed: number; errored: number }>(
      `SELECT count(*) FILTER (WHERE processed)::int AS processed,
              count(*) FILTER (WHERE error IS NOT NULL)::int AS errored
       FROM ${SchemaName.qualify(schema, "queue")}`
    ).pipe(Effect.map((rows) => rows[0]!))

    const deriver = yield* EntryPoint.start("apps/deriver/src/main.ts", {
      DATABASE_URL: proxy.url(cluster.url),
      DB_SCHEMA: schema,
      DB_POOL_CLASS: pool,
      DB_APPLICATION_NAME: application,
      DERIVER_WORKERS: String(workers),
      DERIVER_OVERLOAD_ENABLED: String(overload),
      DERIVER_METRICS_PORT: "0"
    }, { stopWith: "SIGTERM" })
    // Idle first: until the deriver has reached the database, then past its startup delay (up to 30 s), so it
    // polls an empty queue on its schedule when the outage begins.
    while ((yield* proxy.attempts) < 1 && deriver.exitCode() === "running") yield* Effect.sleep("200 millis")
    yield* Effect.sleep(`${idleSeconds} seconds`)
    if (deriver.exitCode() !== "running") {
      return yield* Effect.die(new Error(`${tag} deriver exited:\n${deriver.output()}`))
    }

    // The outage: the deriver's connections are cut and every slot is held; the next connection is refused.
    // (Saturation 0: no outage, the reference drain of the same backlog by an idle deriver.)
    const saturation = saturationSeconds === 0 ? undefined : yield* Effect.andThen(
      sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [application]),
      Saturation.hold(cluster.url, {
        applicationName: "saturator",
        patience: "1 second",
        connectTimeout: "30 seconds"
      }).pipe(Effect.orDie)
    )
    const attemptsBefore = yield* proxy.attempts
    const saturatedAt = now()
    if (saturation !== undefined) {
      console.log(`${tag} saturated: ${saturation.held} slots held, next refused with ${saturation.refusal.code}`)
    }
    // The backlog arrives during the outage.
    yield* withAdmin(Effect.forEach(
      Array.from({ length: units }, (_, i) => i),
      (i) => Messages.append(schema, "bench", `s${i}`, [{ peer: `p${i}`, content: `message ${i}` }]),
      { discard: true }
    )).pipe(Effect.orDie)
    while (now() - saturatedAt < saturationSeconds * 1000) {
      yield* Effect.sleep("1 second")
      const elapsed = Math.round((now() - saturatedAt) / 1000)
      if (elapsed % 30 === 0 && elapsed < saturationSeconds) {
        console.log(`${tag} ${elapsed} s into the saturation, ${(yield* proxy.attempts) - attemptsBefore} attempts`)
      }
    }
    const attemptsDuring = (yield* proxy.attempts) - attemptsBefore
    if (saturation !== undefined) yield* Effect.orDie(saturation.release)
    const releasedAt = now()
    console.log(`${tag} released after ${seconds(releasedAt - saturatedAt)} s; ${attemptsDuring} attempts during it`)

    let first: number | undefined
    let all: number | undefined
    let last = { processed: 0, errored: 0 }
    while (now() - releasedAt < drainLimitSeconds * 1000) {
      last = yield* counts
      if (first === undefined && last.processed > 0) first = now() - releasedAt
      if (last.processed >= units) {
        all = now() - releasedAt
        break
      }
      yield* Effect.sleep("100 millis")
    }
    console.log(
      `${tag} first item ${first === undefined ? "never" : `${seconds(first)} s`}, all ${
        all === undefined ? `not within ${drainLimitSeconds} s (${last.processed} processed)` : `${seconds(all)} s`
      } after the release`
    )
    deriver.child.kill("SIGTERM")
    yield* Effect.promise(() => deriver.exited)
    return {
      pool,
      overload,
      saturationSeconds,
      held: saturation?.held ?? 0,
      attemptsDuring,
      firstAfterRelease: first,
      allAfterRelease: all,
      processed: last.processed,
      errored: last.errored
    } satisfies Figures
  }))

const program = Effect.gen(function*() {
  console.log(
    `recovery bench: ${units} single-item units, deriver app with ${workers} workers at the production defaults ` +
      `(base 1 s, max ${capSeconds} s, jitter 0.5); saturations ${saturations.join(", ")} s; load ${load()}`
  )
  // Runs side by side, each on its own server, at most `concurrency` at once, the longest outages first: they
  // wait out their outages together, and the backlogs drain at different times. A run that fails (a loaded
  // machine's server that does not start) is reported as failed; the others go on.
  const runs = [...saturations].sort((a, b) => b - a).flatMap((saturationSeconds) =>
    pools.flatMap((pool) => overloads.map((overload) => ({ pool, overload, saturationSeconds })))
  )
  const outcomes = yield* Effect.forEach(
    runs,
    ({ overload, pool, saturationSeconds }) =>
      run(pool, overload, saturationSeconds).pipe(
        Effect.tap(() =>
          Effect.sync(() => console.log(`${label(pool, overload, saturationSeconds)} done; load ${load()}`))
        ),
        Effect.catchCause((cause) =>
          Effect.sync(() => {
            console.log(`${label(pool, overload, saturationSeconds)} failed: ${String(cause).slice(0, 300)}`)
            return undefined
          })
        )
      ),
    { concurrency }
  )
  const results = outcomes
    .filter((r): r is Figures => r !== undefined)
    .sort((a, b) => a.saturationSeconds - b.saturationSeconds || a.pool.localeCompare(b.pool))
  console.log(`\nload average at the end: ${load()}\n`)
  console.log(
    `| DB_POOL_CLASS | DERIVER_OVERLOAD_ENABLED | saturation | attempts during it (per ${capSeconds} s) | first item ` +
      `after release | all ${units} after release | drain (all − first) | errored |`
  )
  console.log("|---|---|---|---|---|---|---|---|")
  for (const r of results) {
    // the reference run has no saturation: no rate to give
    const perCap = r.saturationSeconds > 0 ? (r.attemptsDuring / r.saturationSeconds * capSeconds).toFixed(2) : "–"
    console.log(
      `| ${r.pool} | ${r.overload} | ${r.saturationSeconds} s | ${r.attemptsDuring} (${perCap}) | ${
        r.firstAfterRelease === undefined ? "never" : `${seconds(r.firstAfterRelease)} s`
      } | ${
        r.allAfterRelease === undefined
          ? `> ${drainLimitSeconds} s (${r.processed} done)`
          : `${seconds(r.allAfterRelease)} s`
      } | ${
        r.allAfterRelease === undefined || r.firstAfterRelease === undefined
          ? "–"
          : `${seconds(r.allAfterRelease - r.firstAfterRelease)} s`
      } | ${r.errored} |`
    )
  }
  console.log(
    `\ntargets: first item ≤ 45 s (1.5 × the cap) after the release, all ≤ 60 s, attempts ≤ 1 per ${capSeconds} s ` +
      "once at the cap (plus the climb 1, 2, 4, 8, 16 s of a short outage), nothing errored"
  )
})

NodeRuntime.runMain(
  program.pipe(
    Effect.provide(Logger.layer([])),
    Effect.provideService(References.MinimumLogLevel, "Error")
  )
)
