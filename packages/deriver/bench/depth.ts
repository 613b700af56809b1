/**
 * Benchmark (not a test): the cost of the deriver's depth sample (`Maintenance.depthSql`, capped at
 * `DeriverMetrics.queueDepthCap`) on a real PostgreSQL, by queue shape: empty, 10,000 and 1,000,000 pending items
 * (each its own unit; a tenth of them waiting for a later time), and 1,000,000 processed items with 10,000 pending.
 * Each shape is measured right after its rows were written (an `ANALYZE`, no `VACUUM`: the visibility map is
 * empty, so index-only scans read the heap) and after a `VACUUM` (what autovacuum leaves). Prints, per shape, the
 * sample's median and maximum over `BENCH_RUNS` runs (default 30), the `EXPLAIN (ANALYZE, BUFFERS)` of one run,
 * and, beside it, an uncapped `count(*)` of the same rows (what the cap saves).
 *
 *   npm run bench:depth -w @resilience/deriver
 *
 * Uses DATABASE_URL when set; otherwise starts a throw-away embedded PostgreSQL cluster.
 */
import { DbSession } from "@resilience/db-session"
import { Migrator, SchemaName } from "@resilience/schema"
import { Console, Effect, Exit, Scope } from "effect"
import { loadavg } from "node:os"
import pg from "pg"
import { Setup, Stats } from "../../../packages/bench-kit/src/index.ts"
import * as DeriverMetrics from "../src/DeriverMetrics.ts"
import * as Maintenance from "../src/Maintenance.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

const runs = Number(process.env.BENCH_RUNS ?? 30)

interface Shape {
  readonly name: string
  readonly pending: number
  readonly processed: number
}

const shapes: ReadonlyArray<Shape> = [
  { name: "empty", pending: 0, processed: 0 },
  { name: "10,000 pending", pending: 10_000, processed: 0 },
  { name: "1,000,000 pending", pending: 1_000_000, processed: 0 },
  { name: "1,000,000 processed + 10,000 pending", pending: 10_000, processed: 1_000_000 }
]

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const url = yield* Scope.provide(Setup.databaseUrl({ maxConnections: 20 }), scope)
  const client = new pg.Client({ connectionString: url })
  yield* Effect.promise(() => client.connect())
  const q = (text: string, params: ReadonlyArray<unknown> = []) =>
    Effect.promise(() => client.query(text, params as Array<unknown>))
  const session = DbSession.layer({
    url,
    connectTimeout: "5 seconds",
    poolClass: "null",
    poolSize: 1,
    driver: "pg",
    applicationName: "bench-depth"
  })
  yield* Console.log(
    `load average at start: ${loadavg().map((l) => l.toFixed(2)).join(" ")}; cap ${DeriverMetrics.queueDepthCap}`
  )
  for (const shape of shapes) {
    const schema = SchemaName.makeUnsafe("bench_depth")
    const queue = SchemaName.qualify(schema, "queue")
    yield* q(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`)
    yield* Effect.provide(Migrator.run(schema, [QueueSchema.component]), session)
    if (shape.processed > 0) {
      yield* q(
        `INSERT INTO ${queue} (work_unit_key, task_type, processed, processed_at)
         SELECT 'done' || g, 'derive', true, now() FROM generate_series(1, $1) g`,
        [shape.processed]
      )
    }
    if (shape.pending > 0) {
      // every tenth item waits an hour (a retry's time), the rest are due
      yield* q(
        `INSERT INTO ${queue} (work_unit_key, task_type, run_at)
         SELECT 'u' || g, 'derive', CASE WHEN g % 10 = 0 THEN now() + interval '1 hour' END
         FROM generate_series(1, $1) g`,
        [shape.pending]
      )
    }
    for (const state of ["analyzed", "vacuumed"] as const) {
      yield* q(state === "analyzed" ? `ANALYZE ${queue}` : `VACUUM ANALYZE ${queue}`)
      const sql = Maintenance.depthSql(schema)
      const params = [DeriverMetrics.queueDepthCap, Date.now()]
      const times: Array<number> = []
      let row: Record<string, unknown> = {}
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now()
        const result = yield* q(sql, params)
        times.push(performance.now() - t0)
        row = result.rows[0] as Record<string, unknown>
      }
      const plan = yield* q(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${sql}`, params)
      const planText = plan.rows.map((r) => `    ${String(r["QUERY PLAN"])}`).join("\n")
      const executionLine = planText.split("\n").find((l) => l.includes("Execution Time")) ?? ""
      const t0 = performance.now()
      const uncapped = yield* q(`SELECT count(*)::int AS n FROM ${queue} WHERE NOT processed AND run_at IS NULL`)
      const uncappedMillis = performance.now() - t0
      yield* Console.log(
        `\n## ${shape.name} (${state}); load ${loadavg().map((l) => l.toFixed(2)).join(" ")}\n` +
          `  sample: median ${Stats.fixed(Stats.median(times), 3)} ms, max ${
            Stats.fixed(Stats.max(times), 3)
          } ms over ${runs} runs; row ${JSON.stringify(row)}\n` +
          `  EXPLAIN ANALYZE: ${executionLine.trim()}\n` +
          `  uncapped count(*) of the never-timed pending rows: ${uncappedMillis.toFixed(1)} ms (${
            String(uncapped.rows[0]?.n)
          } rows)`
      )
      if (process.env.BENCH_PLANS === "1") yield* Console.log(planText)
    }
  }
  yield* Effect.promise(() => client.end())
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
