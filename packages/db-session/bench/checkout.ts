/**
 * Benchmark (not a test): how fast a checkout fails against a saturated server, how fast it succeeds against
 * a healthy one, and, beside them, the 10 s jittered-retry acquisition that docs/changes.md (change 3) removed, written here
 * and only here as the baseline. Prints progress, then a table.
 *
 *   npm run bench -w @resilience/db-session
 */
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy } from "@resilience/test-db"
import { Console, Effect, type Layer } from "effect"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import { DbSession } from "../src/index.ts"

const SAMPLES = 200
const BASELINE_SAMPLES = 20
const BASELINE_BUDGET_MS = 10_000

const ms = (value: number) => value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${value.toFixed(2)} ms`

interface Row {
  readonly label: string
  readonly samples: ReadonlyArray<number>
  readonly outcome: string
  readonly attempts?: number
}

/** Runs `n` checkouts one after another and measures each. */
const measure = (label: string, n: number, layer: Layer.Layer<DbSession, unknown>) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const samples: Array<number> = []
    const outcomes = new Map<string, number>()
    for (let i = 0; i < n; i++) {
      const started = performance.now()
      const exit = yield* Effect.exit(db.query("select 1"))
      samples.push(performance.now() - started)
      const outcome = exit._tag === "Success"
        ? "ok"
        : (exit.cause.reasons.find((reason) => reason._tag === "Fail")?.error as { reason?: string; _tag: string })
          ?.reason ?? "defect"
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
      if ((i + 1) % 50 === 0) yield* Console.log(`  ${label}: ${i + 1}/${n}`)
    }
    return { label, samples, outcome: [...outcomes].map(([k, v]) => `${k} ×${v}`).join(", ") } satisfies Row
  }).pipe(Effect.provide(layer))

/**
 * THE REMOVED BASELINE, for comparison only: the reference service's acquire_connection_with_retry — on an
 * OperationalError, sleep min(initial × 2^n + uniform(0, jitter), max) and try again, until 10 s have passed.
 * Nothing outside this benchmark does this.
 */
const jitteredRetryAcquisition = (url: string) =>
  Effect.promise(async () => {
    const started = performance.now()
    let attempt = 0
    for (;;) {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
      client.on("error", () => undefined)
      const ok = await client.connect().then(() => true, () => false)
      if (ok) {
        await client.end()
        return { elapsed: performance.now() - started, ok: true }
      }
      const wait = Math.min(0.1 * 2 ** attempt + Math.random() * 0.5, 2) * 1000
      attempt += 1
      if (performance.now() - started + wait > BASELINE_BUDGET_MS) {
        return { elapsed: performance.now() - started, ok: false }
      }
      await new Promise((resolve) => setTimeout(resolve, wait))
    }
  })

const program = Effect.gen(function*() {
  yield* Console.log("db-session checkout benchmark")
  yield* Console.log("[1/5] starting a dedicated PostgreSQL cluster (max_connections=4)…")
  const cluster = yield* Cluster.start({ maxConnections: 4 })
  const proxy = yield* CountingProxy.start(cluster)
  const url = proxy.url(cluster.url)
  const session = (driver: "pg" | "postgres", poolClass: "null" | "queue") =>
    DbSession.layer({ url, driver, poolClass, poolSize: 2, connectTimeout: "2 seconds", applicationName: "bench" })

  const rows: Array<Row> = []
  yield* Console.log(`[2/5] success latency, ${SAMPLES} checkouts each…`)
  for (const driver of ["pg", "postgres"] as const) {
    for (const poolClass of ["null", "queue"] as const) {
      rows.push(yield* measure(`success ${driver}/${poolClass}`, SAMPLES, session(driver, poolClass)))
    }
  }

  const failures = yield* Effect.scoped(Effect.gen(function*() {
    const { held } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
    yield* Console.log(`[3/5] server saturated (${held} slots held); fail-fast latency, ${SAMPLES} checkouts each…`)
    const out: Array<Row> = []
    for (const driver of ["pg", "postgres"] as const) {
      for (const poolClass of ["null", "queue"] as const) {
        const before = yield* proxy.attempts
        const row = yield* measure(`saturated ${driver}/${poolClass}`, SAMPLES, session(driver, poolClass))
        out.push({ ...row, attempts: ((yield* proxy.attempts) - before) / SAMPLES })
      }
    }
    yield* Console.log(
      `[4/5] baseline: ${BASELINE_SAMPLES} concurrent 10 s jittered-retry acquisitions against the same saturated server (~10 s)…`
    )
    const before = yield* proxy.attempts
    const baseline = yield* Effect.forEach(
      Array.from({ length: BASELINE_SAMPLES }),
      () => jitteredRetryAcquisition(url),
      { concurrency: "unbounded" }
    )
    out.push({
      label: "baseline: 10 s jittered retry (removed)",
      samples: baseline.map((result) => result.elapsed),
      outcome: `gave up ×${baseline.filter((result) => !result.ok).length}`,
      attempts: ((yield* proxy.attempts) - before) / BASELINE_SAMPLES
    })
    return out
  }))
  rows.push(...failures)

  yield* Console.log("[5/5] done; cluster stopping.\n")
  const header = "| checkout | p50 | p99 | outcome | attempts per checkout |"
  const lines = [header, "|---|---:|---:|---|---:|"]
  for (const row of rows) {
    lines.push(
      `| ${row.label} | ${ms(Stats.median(row.samples))} | ${
        ms(Stats.quantile(row.samples, 0.99))
      } | ${row.outcome} | ${row.attempts === undefined ? "" : row.attempts.toFixed(2)} |`
    )
  }
  const baselineRow = rows.find((row) => row.label.startsWith("baseline"))
  const failFast = rows.find((row) => row.label === "saturated pg/null")
  yield* Console.log(lines.join("\n"))
  if (baselineRow !== undefined && failFast !== undefined) {
    const ratio50 = Stats.median(baselineRow.samples) / Stats.median(failFast.samples)
    const ratio99 = Stats.quantile(baselineRow.samples, 0.99) / Stats.quantile(failFast.samples, 0.99)
    yield* Console.log(
      `\nbaseline ÷ fail-fast (pg/null, saturated): p50 ×${ratio50.toFixed(0)}, p99 ×${ratio99.toFixed(0)}; ` +
        `connection attempts per acquisition: ${baselineRow.attempts?.toFixed(1)} vs ${failFast.attempts?.toFixed(2)}`
    )
  }
})

await Effect.runPromise(Effect.scoped(program))
