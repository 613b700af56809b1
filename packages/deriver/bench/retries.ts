/**
 * Benchmark (not a test): a downstream outage. `BENCH_ITEMS` items (default 10,000), each its own unit, whose
 * handler's downstream fails (raises `Handlers.Retry`) for the first `BENCH_OUTAGE_SECONDS` (default 60) and
 * then recovers; one deriver with the production defaults (startup jitter off) and the default retry policy
 * (`Retries.defaults`); `BENCH_WORKERS` overrides the deriver's workers (labelled). Prints, per `BENCH_BUCKET_SECONDS` (default 5), the handler runs, the retries
 * scheduled and the successes, until every item is processed (or `BENCH_MAX_SECONDS`, default 600); then checks
 * that every item is processed, none is a dead letter, and every handler succeeded exactly once per item.
 *
 *   npm run bench:retries -w @resilience/deriver
 *
 * Uses DATABASE_URL when set; otherwise starts a throw-away embedded PostgreSQL cluster.
 */
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Effect, Exit, Logger, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import * as Queue from "../src/Queue.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

const items = Number(process.env.BENCH_ITEMS ?? 10_000)
const outageSeconds = Number(process.env.BENCH_OUTAGE_SECONDS ?? 60)
const bucketSeconds = Number(process.env.BENCH_BUCKET_SECONDS ?? 5)
const maxSeconds = Number(process.env.BENCH_MAX_SECONDS ?? 600)

const log = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  let url = process.env.DATABASE_URL
  if (url === undefined || url === "") {
    yield* log("starting an embedded PostgreSQL cluster…")
    url = (yield* Scope.provide(Cluster.start({ maxConnections: 100 }), scope)).url
  }
  const session = DbSession.layer({
    url,
    connectTimeout: "5 seconds",
    poolClass: "queue",
    poolSize: 10,
    driver: "pg",
    applicationName: "bench-retries"
  })
  yield* Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe("bench_retries")
    const db = yield* DbSession
    yield* db.query(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`)
    yield* Migrator.run(schema, [QueueSchema.component])
    yield* db.withConnection((c) =>
      Queue.enqueue(
        c,
        schema,
        Array.from({ length: items }, (_, i) => ({ workUnitKey: `u${i}`, taskType: "call", payload: { i } }))
      )
    )
    const buckets: Array<{ runs: number; retries: number; successes: number }> = []
    const bucket = (at: number) => {
      const index = Math.floor((at - started) / 1000 / bucketSeconds)
      while (buckets.length <= index) buckets.push({ runs: 0, retries: 0, successes: 0 })
      return buckets[index]!
    }
    const successes = new Map<string, number>()
    let started = performance.now()
    const recoverAt = () => started + outageSeconds * 1000
    const handlers = Handlers.make({
      call: (item) =>
        Effect.suspend(() => {
          const at = performance.now()
          const b = bucket(at)
          b.runs++
          if (at < recoverAt()) {
            b.retries++
            return Effect.fail(new Handlers.Retry({ reason: "downstream answered 503" }))
          }
          b.successes++
          successes.set(item.id, (successes.get(item.id) ?? 0) + 1)
          return Effect.void
        })
    })
    const config = yield* DeriverConfig.make({
      pollingStartupJitterSeconds: 0,
      ...(process.env.BENCH_WORKERS === undefined ? {} : { workers: Number(process.env.BENCH_WORKERS) })
    })
    const processed = () =>
      Effect.map(
        db.query<{ n: number; dead: number }>(
          `SELECT count(*) FILTER (WHERE processed)::int AS n, count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead
           FROM ${SchemaName.qualify(schema, "queue")}`
        ),
        (rows) => rows[0]!
      )
    const deriverScope = yield* Scope.make()
    started = performance.now()
    yield* Scope.provide(Deriver.start({ schema, handlers, config }), deriverScope)
    let done = { n: 0, dead: 0 }
    while ((performance.now() - started) / 1000 < maxSeconds) {
      yield* Effect.sleep("1 second")
      done = yield* processed()
      if (done.n + done.dead >= items) break
    }
    const seconds = (performance.now() - started) / 1000
    yield* Scope.close(deriverScope, Exit.void)
    yield* log(
      `\n${items.toLocaleString("en")} items, downstream failing for ${outageSeconds} s; default retry policy; ` +
        `production deriver defaults (workers ${config.workers})\n`
    )
    yield* log(`| seconds | handler runs | retries scheduled (per s) | successes (per s) |`)
    yield* log(`|---|---:|---:|---:|`)
    buckets.forEach((b, i) => {
      if (b.runs === 0) return
      const from = i * bucketSeconds
      const mark = from < outageSeconds && from + bucketSeconds > outageSeconds ? " (recovery)" : ""
      Effect.runSync(log(
        `| ${from}–${from + bucketSeconds}${mark} | ${b.runs} | ${b.retries} (${
          (b.retries / bucketSeconds).toFixed(0)
        }) | ${b.successes} (${(b.successes / bucketSeconds).toFixed(0)}) |`
      ))
    })
    const twice = [...successes.values()].filter((n) => n > 1).length
    const retries = buckets.reduce((sum, b) => sum + b.retries, 0)
    const peak = Math.max(...buckets.map((b) => b.retries / bucketSeconds))
    yield* log(
      `\nall processed: ${done.n === items} (${done.n} of ${items}, ${done.dead} dead letters) in ${
        seconds.toFixed(1)
      } s; ` +
        `succeeded once each: ${successes.size === items && twice === 0} (${successes.size} items, ${twice} twice); ` +
        `retries scheduled ${retries} (${(retries / items).toFixed(2)} per item), peak ${peak.toFixed(0)}/s`
    )
  }).pipe(Effect.provide(session))
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
