/**
 * Benchmark (not a test): the claim query with 1,000,000 processed rows and 100 pending in one tenant, with
 * and without the partial index, and no-op-handler throughput of one deriver with WORKERS = 1 and 8.
 *
 *   npm run bench -w @resilience/deriver
 *
 * Uses DATABASE_URL when set; otherwise starts a throw-away embedded PostgreSQL cluster (stopped at the end).
 * BENCH_ROWS overrides the number of processed rows (default 1,000,000).
 */
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Effect, Exit, Layer, Logger, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import * as Migrator from "../src/Migrator.ts"
import * as Queue from "../src/Queue.ts"
import * as QueueSchema from "../src/QueueSchema.ts"
import * as SchemaName from "../src/SchemaName.ts"

const processedRows = Number(process.env.BENCH_ROWS ?? 1_000_000)
const pendingRows = 100
const throughputItems = Number(process.env.BENCH_ITEMS ?? 2000)

const log = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))
const now = () => performance.now()

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}
const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!
}

const session = (url: string, poolClass: "null" | "queue") =>
  DbSession.layer({ url, connectTimeout: "5 seconds", poolClass, poolSize: 10, driver: "pg", applicationName: "bench" })

/** EXPLAIN ANALYZE of the claim, in a transaction that rolls back (the claim inserts ownership rows). */
const explainClaim = (schema: SchemaName.SchemaName, dropIndex: boolean) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.withConnection((c) =>
      Effect.gen(function*() {
        yield* c.query("BEGIN")
        if (dropIndex) yield* c.query(`DROP INDEX ${SchemaName.qualify(schema, "queue_unprocessed_idx")}`)
        const rows = yield* c.query<{ "QUERY PLAN": string }>(
          `EXPLAIN (ANALYZE, BUFFERS) ${Queue.claimSql(schema)}`,
          [8, "bench"]
        )
        yield* c.query("ROLLBACK")
        const plan = rows.map((r) => r["QUERY PLAN"]).join("\n")
        const time = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN)
        return { plan, time }
      })
    )
  })

const claimBenchmark = (url: string) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe("bench_claim")
    const db = yield* DbSession
    yield* db.query(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`)
    yield* Migrator.run(schema, [QueueSchema.component])
    const queue = SchemaName.qualify(schema, "queue")
    const batch = 100_000
    const started = now()
    for (let loaded = 0; loaded < processedRows; loaded += batch) {
      const n = Math.min(batch, processedRows - loaded)
      yield* db.query(
        `INSERT INTO ${queue} (work_unit_key, task_type, payload, processed, created_at)
         SELECT 'representation:acme:s' || (g % 20000) || ':peer', 'representation', '{"workspace":"acme"}'::jsonb,
                true, now() - interval '1 day'
         FROM generate_series($1::int, $2::int) g`,
        [loaded + 1, loaded + n]
      )
      yield* log(
        `  loading: ${(loaded + n).toLocaleString("en")} / ${processedRows.toLocaleString("en")} processed rows` +
          ` (${((now() - started) / 1000).toFixed(1)} s)`
      )
    }
    yield* db.withConnection((c) =>
      Queue.enqueue(
        c,
        schema,
        Array.from({ length: pendingRows }, (_, i) => ({
          workUnitKey: `representation:acme:new${i}:peer`,
          taskType: "representation",
          payload: { workspace: "acme" }
        }))
      )
    )
    yield* db.query(`VACUUM ANALYZE ${queue}`)
    yield* log(`  loaded ${processedRows.toLocaleString("en")} processed + ${pendingRows} pending rows; vacuumed`)
    const withIndex: Array<number> = []
    let plan = ""
    for (let i = 0; i < 21; i++) {
      const result = yield* explainClaim(schema, false)
      if (i === 0) plan = result.plan
      else withIndex.push(result.time)
    }
    const withoutIndex: Array<number> = []
    let seqPlan = ""
    for (let i = 0; i < 5; i++) {
      const result = yield* explainClaim(schema, true)
      if (i === 0) seqPlan = result.plan
      withoutIndex.push(result.time)
    }
    void url
    return { plan, seqPlan, withIndex, withoutIndex, usesIndex: plan.includes("queue_unprocessed_idx") }
  })

const throughput = (workers: number) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_tp_${workers}`)
    const db = yield* DbSession
    yield* db.query(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`)
    yield* Migrator.run(schema, [QueueSchema.component])
    const units = throughputItems / 10
    yield* db.withConnection((c) =>
      Queue.enqueue(
        c,
        schema,
        Array.from(
          { length: throughputItems },
          (_, i) => ({ workUnitKey: `unit-${i % units}`, taskType: "noop", payload: {} })
        )
      )
    )
    const config = yield* Effect.orDie(DeriverConfig.make({
      workers,
      pollingSleepIntervalSeconds: 0.01,
      pollingSleepMaxIntervalSeconds: 0.1,
      pollingStartupJitterSeconds: 0
    }))
    const scope = yield* Scope.make()
    const started = now()
    yield* Scope.provide(Deriver.start({ schema, handlers: Handlers.make({ noop: () => Effect.void }), config }), scope)
    while (true) {
      const rows = yield* db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`
      )
      if (rows[0]!.n === 0) break
      yield* Effect.sleep("20 millis")
    }
    const seconds = (now() - started) / 1000
    yield* Scope.close(scope, Exit.void)
    return throughputItems / seconds
  })

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  let url = process.env.DATABASE_URL
  if (url === undefined || url === "") {
    yield* log("starting an embedded PostgreSQL cluster…")
    url = (yield* Scope.provide(Cluster.start({ maxConnections: 100 }), scope)).url
  }
  const dbUrl = url
  yield* log(`claim query: ${processedRows.toLocaleString("en")} processed rows + ${pendingRows} pending, one tenant`)
  const claim = yield* claimBenchmark(dbUrl).pipe(Effect.provide(session(dbUrl, "queue")))
  yield* log("\nclaim plan (partial index):\n" + claim.plan.split("\n").map((l) => "  " + l).join("\n"))
  yield* log(
    "\nclaim plan without the partial index (dropped in a rolled-back transaction):\n" +
      claim.seqPlan.split("\n").slice(0, 12).map((l) => "  " + l).join("\n")
  )

  const rates: Array<{ workers: number; poolClass: string; rate: number }> = []
  for (const poolClass of ["null", "queue"] as const) {
    for (const workers of [1, 8]) {
      yield* log(`throughput: ${throughputItems} no-op items, WORKERS=${workers}, DB_POOL_CLASS=${poolClass}…`)
      const rate = yield* throughput(workers).pipe(Effect.provide(session(dbUrl, poolClass)))
      rates.push({ workers, poolClass, rate })
    }
  }
  const fmt = (ms: number) => `${ms.toFixed(3)} ms`
  yield* log("\n| measurement | value |\n|---|---|")
  yield* log(`| claim uses queue_unprocessed_idx | ${claim.usesIndex ? "yes" : "NO"} |`)
  yield* log(`| claim execution time, partial index (median of 20) | ${fmt(median(claim.withIndex))} |`)
  yield* log(`| claim execution time, partial index (p95 of 20) | ${fmt(percentile(claim.withIndex, 0.95))} |`)
  yield* log(`| claim execution time without the index (median of 5) | ${fmt(median(claim.withoutIndex))} |`)
  for (const { poolClass, rate, workers } of rates) {
    yield* log(`| no-op throughput, WORKERS=${workers}, DB_POOL_CLASS=${poolClass} | ${rate.toFixed(0)} items/s |`)
  }
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
void Layer
