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
 * With `BENCH_FLAKY_MAX` (say 3) it measures retries at their time instead (issue #47): `BENCH_ITEMS` items (say 300),
 * each its own unit, item i failing transiently `i mod (BENCH_FLAKY_MAX + 1)` times, under a policy of
 * `BENCH_RETRY_BASE_MS` (20) and `BENCH_RETRY_CAP_MS` (200), `BENCH_WORKERS` (4); prints the time to process them all
 * and, per retried item, how long it took from its first run to its success against the sum of its backoffs (the
 * times its retries were scheduled for, read from the queue as each run starts), and how late each retry ran.
 *
 * Uses DATABASE_URL when set; otherwise starts a throw-away embedded PostgreSQL cluster.
 */
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Clock, Console, Effect, Exit, Logger, Scope } from "effect"
import { Setup, Stats } from "../../../packages/bench-kit/src/index.ts"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import { freshQueue } from "./support.ts"

const items = Number(process.env.BENCH_ITEMS ?? 10_000)
const outageSeconds = Number(process.env.BENCH_OUTAGE_SECONDS ?? 60)
const bucketSeconds = Number(process.env.BENCH_BUCKET_SECONDS ?? 5)
const maxSeconds = Number(process.env.BENCH_MAX_SECONDS ?? 600)

/** A fresh queue schema with `items` single-item units of task type `call`; the session. */
const freshCalls = (schema: SchemaName.SchemaName) =>
  freshQueue(
    schema,
    Array.from({ length: items }, (_, i) => ({ workUnitKey: `u${i}`, taskType: "call", payload: { i } }))
  )

const flakyMax = process.env.BENCH_FLAKY_MAX === undefined ? undefined : Number(process.env.BENCH_FLAKY_MAX)

/** Retries at their time: items failing 0..flakyMax times with millisecond backoffs (see the header). */
const flaky = (flakyMax: number) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe("bench_retries_flaky")
    const db = yield* freshCalls(schema)
    /** Per item: when each run started, the time it was scheduled for (null: the first run). */
    const runs = new Map<string, Array<{ readonly at: number; readonly runAt: number | null }>>()
    const base = Handlers.make({
      call: (item) =>
        Effect.gen(function*() {
          const at = yield* Clock.currentTimeMillis
          const [row] = yield* db.query<{ run_at: number | null }>(
            `SELECT (extract(epoch FROM run_at) * 1000)::float8 AS run_at FROM ${
              SchemaName.qualify(schema, "queue")
            } WHERE id = $1`,
            [item.id]
          ).pipe(Effect.orDie)
          const list = runs.get(item.id) ?? []
          list.push({ at, runAt: row?.run_at ?? null })
          runs.set(item.id, list)
          const failures = (item.payload as { i: number }).i % (flakyMax + 1)
          if ((item.attempts ?? 0) < failures) return yield* new Handlers.Retry({ reason: "downstream answered 503" })
        })
    })
    const baseMillis = Number(process.env.BENCH_RETRY_BASE_MS ?? 20)
    const capMillis = Number(process.env.BENCH_RETRY_CAP_MS ?? 200)
    const handlers = yield* Handlers.withRetries(base, "call", {
      maxAttempts: flakyMax + 2,
      base: baseMillis,
      cap: capMillis
    })
    const config = yield* DeriverConfig.make({
      pollingStartupJitterSeconds: 0,
      workers: Number(process.env.BENCH_WORKERS ?? 4),
      // a diagnostic (labelled in the output): units claimed beyond the workers other than the default
      ...(process.env.BENCH_PREFETCH === undefined ? {} : { prefetch: Number(process.env.BENCH_PREFETCH) })
    })
    const deriverScope = yield* Scope.make()
    const started = yield* Clock.currentTimeMillis
    yield* Scope.provide(Deriver.start({ schema, handlers, config }), deriverScope)
    let processed = 0
    while ((yield* Clock.currentTimeMillis) - started < maxSeconds * 1000) {
      yield* Effect.sleep("50 millis")
      const [row] = yield* db.query<{ n: number }>(
        `SELECT count(*) FILTER (WHERE processed)::int AS n FROM ${SchemaName.qualify(schema, "queue")}`
      )
      processed = row?.n ?? 0
      if (processed >= items) break
    }
    const seconds = ((yield* Clock.currentTimeMillis) - started) / 1000
    yield* Scope.close(deriverScope, Exit.void)
    const ratios: Array<number> = []
    const late: Array<number> = []
    let backoffSum = 0
    for (const list of runs.values()) {
      const retries = list.slice(1)
      if (retries.length === 0) continue
      const backoffs = retries.reduce((sum, run, k) => sum + (run.runAt ?? run.at) - list[k]!.at, 0)
      backoffSum += backoffs
      ratios.push((list.at(-1)!.at - list[0]!.at) / Math.max(1, backoffs))
      for (const run of retries) late.push(run.at - (run.runAt ?? run.at))
    }
    yield* Console.log(
      `\n${items} items, item i failing i mod ${
        flakyMax + 1
      } times; retry policy base ${baseMillis} ms, cap ${capMillis} ms; ` +
        `production deriver defaults (workers ${config.workers}, prefetch ${config.prefetch})\n` +
        `all processed: ${processed === items} (${processed} of ${items}) in ${seconds.toFixed(1)} s; ` +
        `${late.length} retries, their backoffs summing to ${(backoffSum / 1000).toFixed(1)} s\n` +
        `per retried item, (success − first run) ÷ its backoffs: p50 ${Stats.fixed(Stats.median(ratios), 2)}, ` +
        `p90 ${Stats.fixed(Stats.quantile(ratios, 0.9), 2)}, max ${Stats.fixed(Stats.max(ratios), 2)}\n` +
        `a retry's run after its time: p50 ${Stats.fixed(Stats.median(late), 0)} ms, p99 ${
          Stats.fixed(Stats.quantile(late, 0.99), 0)
        } ms, max ${Stats.fixed(Stats.max(late), 0)} ms`
    )
  })

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const url = yield* Scope.provide(Setup.databaseUrl({ maxConnections: 100 }), scope)
  const session = DbSession.layer({
    url,
    connectTimeout: "5 seconds",
    poolClass: "queue",
    poolSize: 10,
    driver: "pg",
    applicationName: "bench-retries"
  })
  yield* (flakyMax !== undefined ? flaky(flakyMax) : Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe("bench_retries")
    const db = yield* freshCalls(schema)
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
    yield* Console.log(
      `\n${items.toLocaleString("en")} items, downstream failing for ${outageSeconds} s; default retry policy; ` +
        `production deriver defaults (workers ${config.workers}, prefetch ${config.prefetch})\n`
    )
    yield* Console.log(`| seconds | handler runs | retries scheduled (per s) | successes (per s) |`)
    yield* Console.log(`|---|---:|---:|---:|`)
    buckets.forEach((b, i) => {
      if (b.runs === 0) return
      const from = i * bucketSeconds
      const mark = from < outageSeconds && from + bucketSeconds > outageSeconds ? " (recovery)" : ""
      Effect.runSync(Console.log(
        `| ${from}–${from + bucketSeconds}${mark} | ${b.runs} | ${b.retries} (${
          (b.retries / bucketSeconds).toFixed(0)
        }) | ${b.successes} (${(b.successes / bucketSeconds).toFixed(0)}) |`
      ))
    })
    const twice = [...successes.values()].filter((n) => n > 1).length
    const retries = buckets.reduce((sum, b) => sum + b.retries, 0)
    const peak = Math.max(...buckets.map((b) => b.retries / bucketSeconds))
    yield* Console.log(
      `\nall processed: ${done.n === items} (${done.n} of ${items}, ${done.dead} dead letters) in ${
        seconds.toFixed(1)
      } s; ` +
        `succeeded once each: ${successes.size === items && twice === 0} (${successes.size} items, ${twice} twice); ` +
        `retries scheduled ${retries} (${(retries / items).toFixed(2)} per item), peak ${peak.toFixed(0)}/s`
    )
  })).pipe(Effect.provide(session))
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exit(1)
})
