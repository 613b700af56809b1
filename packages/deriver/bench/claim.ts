/**
 * Benchmark (not a test): the claim query with 1,000,000 processed rows and 100 pending in one tenant, with
 * and without the partial index; no-op-handler throughput of one deriver with the production defaults first
 * (base 1 s, max 30 s; startup jitter off so the start is not measured), then with a tuned 10 ms interval,
 * for WORKERS 1 and 8, both pool classes, units of 10 and of 1 item; and the latency of a unit that arrives
 * while every worker is busy; and (part `statements`) the claim and record statements alone, back to back on a
 * bare `pg.Client`: a record that claims the next unit in the same statement (as the deriver's workers), calls
 * of the functions of queue migration 7 one by one, the statements' text unnamed (as before) and as named
 * prepared statements: what a unit costs below the deriver's own path, and what planning costs of it.
 *
 *   npm run bench -w @resilience/deriver
 *
 * Uses DATABASE_URL when set; otherwise starts a throw-away embedded PostgreSQL cluster (stopped at the end).
 * BENCH_ROWS overrides the number of processed rows (default 1,000,000), BENCH_ITEMS the items per throughput
 * run (default 1,000), BENCH_RUN_SECONDS the time bound of one run (default 15; a run that does not finish
 * reports the items recorded in that time), BENCH_LATENCY_ROUNDS the busy-latency rounds (default 10).
 * Comma lists choose what runs: BENCH_PARTS (claim, throughput, latency; statements and retries (after claim)
 * only when named; BENCH_WAITING the items waiting for a retry, default 100,000), BENCH_LABELS (defaults, tuned),
 * BENCH_UNIT_SIZES (10, 1), BENCH_POOLS (queue, null), BENCH_WORKERS (1, 8), BENCH_PREFETCH (default: the
 * configuration's, 8 per worker; other values, units claimed beyond the workers, are labelled in the table).
 *
 * Part `steady` (only when named; issue #45): a fresh schema, autovacuum off on its two tables (no ANALYZE until the
 * end), takes single-item units at a steady BENCH_RATE a second (default 500; every 100 ms the items due by then)
 * until BENCH_STEADY_ITEMS are enqueued (default 100,000), drained by one deriver with 8 workers, the production
 * defaults and a no-op handler, per pool of BENCH_POOLS; bounded by BENCH_STEADY_SECONDS (default 300). Every
 * BENCH_STEADY_WINDOW items recorded (default 10,000), a row: completion and enqueue rates, backlog, and from
 * `pg_stat_statements` the claims, their server time and JIT-compiled functions in the window; at the end the
 * tables' `pg_stat_user_tables` (no ANALYZE), then ANALYZE. A cluster the bench starts preloads `pg_stat_statements`
 * (track = all) only when `steady` runs; with DATABASE_URL it creates the extension when the server has it loaded,
 * else the server-side columns are empty. The full run, on a quiet machine:
 *
 *   BENCH_PARTS=steady BENCH_POOLS=queue npm run bench -w @resilience/deriver
 */
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { Deferred, Duration, Effect, Exit, Fiber, Logger, Metric, Scope } from "effect"
import pg from "pg"
import { median, quantile as percentile } from "../../../packages/bench-kit/src/Stats.ts"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as DeriverMetrics from "../src/DeriverMetrics.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as Handlers from "../src/Handlers.ts"
import * as Names from "../src/internal/Names.ts"
import type * as PollLoop from "../src/PollLoop.ts"
import * as Queue from "../src/Queue.ts"
import type * as Scheduling from "../src/Scheduling.ts"
import { claimStatements, releasedRecordStatement } from "../test/InstalledStatements.ts"
import { freshQueue } from "./support.ts"

const processedRows = Number(process.env.BENCH_ROWS ?? 1_000_000)
const pendingRows = 100
const throughputItems = Number(process.env.BENCH_ITEMS ?? 1000)
const latencyRounds = Number(process.env.BENCH_LATENCY_ROUNDS ?? 10)
const runSeconds = Number(process.env.BENCH_RUN_SECONDS ?? 15)

const log = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))
const now = () => performance.now()

const session = (url: string, poolClass: "null" | "queue") =>
  DbSession.layer({ url, connectTimeout: "5 seconds", poolClass, poolSize: 10, driver: "pg", applicationName: "bench" })

/** EXPLAIN ANALYZE of the claim, in a transaction that rolls back (the claim inserts ownership rows). */
const explainClaim = (schema: SchemaName.SchemaName, dropIndex: boolean | "timed") =>
  Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.withConnection((c) =>
      Effect.gen(function*() {
        yield* c.query("BEGIN")
        // "timed": only the indexes of queue migration 8 (the claim then walks queue_pending_id_idx, filtering
        // on run_at: what it would cost without them)
        const dropped = dropIndex === "timed"
          ? ["queue_ready_id_idx", "queue_run_at_idx"]
          : dropIndex
          ? ["queue_unprocessed_idx", "queue_pending_id_idx", "queue_ready_id_idx", "queue_run_at_idx"]
          : []
        for (const index of dropped) yield* c.query(`DROP INDEX ${SchemaName.qualify(schema, index)}`)
        const rows = yield* c.query<{ "QUERY PLAN": string }>(
          `EXPLAIN (ANALYZE, BUFFERS) ${claimStatements(schema).due}`,
          [8, "bench", 0, Date.now()]
        )
        yield* c.query("ROLLBACK")
        const plan = rows.map((r) => r["QUERY PLAN"]).join("\n")
        const time = Number(/Execution Time: ([\d.]+) ms/.exec(plan)?.[1] ?? NaN)
        return { plan, time }
      })
    )
  })

/** `pendingRows` single-item units named `representation:acme:{prefix}{i}:peer`. */
const enqueuePending = (schema: SchemaName.SchemaName, prefix: string) =>
  DbSession.use((db) =>
    db.withConnection((c) =>
      Enqueue.enqueue(
        c,
        schema,
        Array.from({ length: pendingRows }, (_, i) => ({
          workUnitKey: `representation:acme:${prefix}${i}:peer`,
          taskType: "representation",
          payload: { workspace: "acme" }
        }))
      )
    )
  )

const claimBenchmark = (url: string) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe("bench_claim")
    const db = yield* freshQueue(schema)
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
    yield* enqueuePending(schema, "new")
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
    return {
      plan,
      seqPlan,
      withIndex,
      withoutIndex,
      usesIndex: plan.includes("queue_ready_id_idx") && !plan.includes("Seq Scan on queue")
    }
  })

const waitingRows = Number(process.env.BENCH_WAITING ?? 100_000)

/**
 * Part `retries` (after `claim`, in its schema): `waitingRows` items waiting for a retry (due in an hour, one
 * attempt made, each the head of its own unit, older than the pending ones: the walk in id order meets them
 * first), then 100 new pending units; the claim's plan and time, with the indexes of queue migration 8 and
 * without them; then the same with one later item behind each waiting item (what the claim still walks).
 */
const waitingBenchmark = Effect.gen(function*() {
  const schema = SchemaName.makeUnsafe("bench_claim")
  const db = yield* DbSession
  const queue = SchemaName.qualify(schema, "queue")
  const times = (mode: boolean | "timed", n: number) =>
    Effect.gen(function*() {
      const out: Array<number> = []
      let plan = ""
      for (let i = 0; i < n + 1; i++) {
        const result = yield* explainClaim(schema, mode)
        if (i === 0) plan = result.plan
        else out.push(result.time)
      }
      return { plan, times: out }
    })
  yield* db.query(`UPDATE ${queue} SET processed = true WHERE NOT processed`)
  yield* db.query(
    `INSERT INTO ${queue} (work_unit_key, task_type, payload, attempts, last_error, run_at)
     SELECT 'representation:acme:wait' || g || ':peer', 'representation', '{"workspace":"acme"}'::jsonb, 1,
            'provider answered 503', now() + interval '1 hour' + g * interval '1 millisecond'
     FROM generate_series(1, $1::int) g`,
    [waitingRows]
  )
  const pending = () => enqueuePending(schema, "fresh")
  yield* pending()
  yield* db.query(`VACUUM ANALYZE ${queue}`)
  const waiting = yield* times(false, 20)
  const unindexed = yield* times("timed", 5)
  yield* db.query(`UPDATE ${queue} SET processed = true WHERE NOT processed AND run_at IS NULL`)
  // Enqueued after their units' first items wait: Enqueue.enqueue gives each the time of its unit's first item.
  for (let from = 1; from <= waitingRows; from += 10_000) {
    yield* db.withConnection((c) =>
      Enqueue.enqueue(
        c,
        schema,
        Array.from({ length: Math.min(10_000, waitingRows - from + 1) }, (_, i) => ({
          workUnitKey: `representation:acme:wait${from + i}:peer`,
          taskType: "representation",
          payload: { workspace: "acme" }
        }))
      )
    )
  }
  yield* pending()
  yield* db.query(`VACUUM ANALYZE ${queue}`)
  const behind = yield* times(false, 20)
  // The function the deriver calls (its generic plan, kept per connection), timed by the server.
  const functionTimes: Array<number> = []
  for (let i = 0; i < 21; i++) {
    const time = yield* db.withConnection((c) =>
      Effect.gen(function*() {
        yield* c.query("BEGIN")
        const rows = yield* c.query<{ "QUERY PLAN": string }>(
          `EXPLAIN (ANALYZE) SELECT * FROM ${Queue.calls(schema).claim}`,
          [8, "bench", 20, Date.now()]
        )
        yield* c.query("ROLLBACK")
        return Number(/Execution Time: ([\d.]+) ms/.exec(rows.map((r) => r["QUERY PLAN"]).join("\n"))?.[1] ?? NaN)
      })
    )
    if (i > 0) functionTimes.push(time)
  }
  return { waiting, unindexed, behind, functionTimes }
})

const statementModes = {
  along: "queue_record_done then queue_claim in one statement (as the deriver's workers, after the first claim)",
  functions: "calls of queue_claim and queue_record_done (as the deriver's poller and a record that claims nothing)",
  unnamed: "the statements' text, unnamed (as before queue migration 7)",
  named: "the statements' text as named prepared statements"
} as const

/**
 * The unit's statements without the deriver: `units` single-item units claimed one at a time and recorded
 * (released) at once on one bare `pg.Client`, in one of {@link statementModes}; per-unit milliseconds (with
 * `along`, the claim column is 0: each record brings the next unit).
 */
const statements = (url: string, units: number, mode: keyof typeof statementModes) =>
  Effect.gen(function*() {
    const named = mode === "named"
    const schema = SchemaName.makeUnsafe(`bench_st_${mode}`)
    const db = yield* freshQueue(
      schema,
      Array.from({ length: units }, (_, i) => ({ workUnitKey: `unit-${i}`, taskType: "noop", payload: {} }))
    )
    const figures = yield* Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      client.on("error", () => {})
      await client.connect()
      // done outcomes, as the deriver's no-op handlers give: the record the deriver calls for them
      const { claim, recordDone } = Queue.calls(schema)
      const claimText = mode === "functions" || mode === "along"
        ? `SELECT work_unit_key, id, items FROM ${claim}`
        : claimStatements(schema).due
      const recordText = mode === "functions"
        ? `SELECT owned, marked FROM ${recordDone}`
        : releasedRecordStatement(schema)
      let claimMillis = 0
      let recordMillis = 0
      const started = now()
      if (mode === "along") {
        type Row = { work_unit_key: string | null; id: string | null; items: string | null }
        let row: Row | undefined = (await client.query<Row>(claimText, [1, "bench", 20, Date.now()])).rows[0]
        for (let i = 0; i < units && row !== undefined && row.work_unit_key !== null; i++) {
          const items = JSON.parse(row.items!) as ReadonlyArray<{ id: string }>
          const before = now()
          const { rows }: { rows: Array<Row> } = await client.query<Row>(Queue.recordAndClaimSql(schema, "done"), [
            JSON.stringify(items.map((item) => ({ id: item.id, error: null }))),
            row.work_unit_key,
            "bench",
            true,
            row.id,
            1,
            20,
            Date.now()
          ])
          recordMillis += now() - before
          row = rows[0]
        }
      }
      for (let i = 0; i < (mode === "along" ? 0 : units); i++) {
        const claimValues = [1, "bench", 20, Date.now()]
        const before = now()
        const { rows } = await client.query<{ work_unit_key: string; id: string; items: string }>(
          named ? { name: "claim", text: claimText, values: claimValues } : { text: claimText, values: claimValues }
        )
        const claimed = now()
        const row = rows[0]!
        const items = JSON.parse(row.items) as ReadonlyArray<{ id: string }>
        const recordValues = [
          JSON.stringify(items.map((item) => ({ id: item.id, error: null }))),
          row.work_unit_key,
          "bench",
          true,
          row.id
        ]
        await client.query(
          named
            ? { name: "record", text: recordText, values: recordValues }
            : { text: recordText, values: recordValues }
        )
        claimMillis += claimed - before
        recordMillis += now() - claimed
      }
      const seconds = (now() - started) / 1000
      let roundTrip = 0
      for (let i = 0; i < 100; i++) {
        const before = now()
        await client.query("SELECT 1")
        roundTrip += now() - before
      }
      await client.end()
      return {
        mode,
        units,
        seconds,
        claimMillis: claimMillis / units,
        recordMillis: recordMillis / units,
        roundTripMillis: roundTrip / 100
      }
    })
    yield* db.query(`DROP SCHEMA ${SchemaName.quote(schema)} CASCADE`)
    return figures
  })

const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback).split(",").map((value) => value.trim()).filter((value) => value !== "")
/** What to run: `claim` (the query on a large history), `throughput`, `latency` (default: all three). */
const parts = new Set(list("BENCH_PARTS", "claim,throughput,latency"))
const labels = list("BENCH_LABELS", "defaults,tuned") as ReadonlyArray<"defaults" | "tuned">
const unitSizes = list("BENCH_UNIT_SIZES", "10,1").map(Number)
const pools = list("BENCH_POOLS", "queue,null") as ReadonlyArray<"null" | "queue">
const workerCounts = list("BENCH_WORKERS", "1,8").map(Number)
/**
 * Units claimed beyond the workers (`DeriverConfig.prefetch`): `default` (the configuration's default for the worker
 * count), then other values, labelled.
 */
const prefetches = list("BENCH_PREFETCH", "default").map((value) => value === "default" ? undefined : Number(value))

/** A throughput run: its settings and the figure measured. */
interface Run {
  /** The units claimed beyond the workers the run had. */
  readonly prefetch: number
  readonly label: "defaults" | "tuned"
  readonly poolClass: "null" | "queue"
  readonly workers: number
  readonly unitSize: number
  readonly items: number
  readonly seconds: number
  /** Polls by outcome, and the units the polls claimed (the others were claimed along by a worker). */
  readonly polls: Record<Scheduling.Outcome, number> & { readonly units: number }
  /** The run's checkouts (start to shutdown, see `dbStats`). */
  readonly checkouts: number
}

/**
 * This process's checkouts so far (`db_acquisitions_total`, every pool class): the deriver sends one statement per
 * checkout on its paths of a unit (claim, read, record), so per unit it is the statements a unit costs.
 */
const dbStats = Effect.map(Metric.snapshot, (snapshots) => ({
  checkouts: snapshots.reduce(
    (sum, s) => s.id === "db_acquisitions_total" && s.type === "Counter" ? sum + Number(s.state.count) : sum,
    0
  )
}))

/** The settings users run (base 1 s, max 30 s), startup jitter off so the start is not measured. */
const productionDefaults: DeriverConfig.Input = { pollingStartupJitterSeconds: 0 }
/** The tuned settings of earlier reports: a 10 ms base interval. */
const tunedInterval: DeriverConfig.Input = {
  pollingSleepIntervalSeconds: 0.01,
  pollingSleepMaxIntervalSeconds: 0.1,
  pollingStartupJitterSeconds: 0
}

let runs = 0
const throughput = (
  label: Run["label"],
  poolClass: Run["poolClass"],
  workers: number,
  unitSize: number,
  prefetch: number | undefined
) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_tp_${runs++}`)
    const units = Math.ceil(throughputItems / unitSize)
    const db = yield* freshQueue(
      schema,
      Array.from(
        { length: throughputItems },
        (_, i) => ({ workUnitKey: `unit-${i % units}`, taskType: "noop", payload: {} })
      )
    )
    const config = yield* Effect.orDie(
      DeriverConfig.make({
        workers,
        ...(label === "defaults" ? productionDefaults : tunedInterval),
        ...(prefetch === undefined ? {} : { prefetch })
      })
    )
    const statsBefore = yield* dbStats
    let handled = 0
    // the path the units took: polls by outcome and the units the polls claimed (the rest were claimed along)
    const polls = { claimed: 0, empty: 0, busy: 0, error: 0, units: 0 }
    const observer = (event: PollLoop.Event) =>
      Effect.sync(() => {
        if (event._tag !== "Polled") return
        polls[event.outcome]++
        polls.units += event.claimed.length
      })
    const scope = yield* Scope.make()
    const started = now()
    yield* Scope.provide(
      Deriver.start({
        schema,
        handlers: Handlers.make({ noop: () => Effect.sync(() => handled++) }),
        config,
        observer
      }),
      scope
    )
    // Wait on the handler count (no extra database load), then confirm in the database that all is recorded;
    // a run is bounded in time (BENCH_RUN_SECONDS): a slow configuration reports what it did in that time.
    const deadline = started + runSeconds * 1000
    let recorded = 0
    while (true) {
      const timeUp = now() >= deadline
      if (handled >= throughputItems || timeUp) {
        const rows = yield* db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE processed`
        )
        recorded = rows[0]!.n
        if (recorded === throughputItems || timeUp) break
      }
      yield* Effect.sleep("2 millis")
    }
    const seconds = (now() - started) / 1000
    yield* Scope.close(scope, Exit.void)
    const statsAfter = yield* dbStats
    yield* db.query(`DROP SCHEMA ${SchemaName.quote(schema)} CASCADE`)
    const checkouts = statsAfter.checkouts - statsBefore.checkouts
    return {
      prefetch: config.prefetch,
      label,
      poolClass,
      workers,
      unitSize,
      items: recorded,
      seconds,
      polls,
      checkouts
    } satisfies Run
  })

/**
 * Latency of a unit that arrives while every worker is busy: WORKERS=8 (production defaults) hold 8 blocking
 * units; a probe unit is enqueued, then one blocker is let go. Measures from the moment that worker is free
 * to the probe's handler start (the old busy branch waited a jittered base interval, 0.5–1.5 s), and from
 * the probe's arrival to its start.
 */
const busyLatency = (poolClass: Run["poolClass"], rounds: number) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_busy_${runs++}`)
    const db = yield* freshQueue(schema)
    const gates = new Map<string, Deferred.Deferred<void>>()
    const starts = new Map<string, number>()
    const handlers = Handlers.make({
      block: (item) =>
        Effect.gen(function*() {
          const gate = yield* Deferred.make<void>()
          gates.set(item.workUnitKey, gate)
          yield* Deferred.await(gate)
        }),
      probe: (item) => Effect.sync(() => starts.set(item.workUnitKey, now()))
    })
    const config = yield* Effect.orDie(DeriverConfig.make({ workers: 8, ...productionDefaults }))
    const scope = yield* Scope.make()
    yield* Scope.provide(Deriver.start({ schema, handlers, config }), scope)
    const freeToStart: Array<number> = []
    const arrivalToStart: Array<number> = []
    const enqueue = (items: ReadonlyArray<Enqueue.NewItem>) =>
      db.withConnection((c) => Enqueue.enqueue(c, schema, items))
    for (let round = 0; round < rounds; round++) {
      gates.clear()
      yield* enqueue(
        Array.from({ length: 8 }, (_, i) => ({ workUnitKey: `r${round}-b${i}`, taskType: "block", payload: {} }))
      )
      while (gates.size < 8) yield* Effect.sleep("1 millis")
      const probe = `r${round}-probe`
      const arrived = now()
      yield* enqueue([{ workUnitKey: probe, taskType: "probe", payload: {} }])
      yield* Effect.sleep("100 millis")
      const freed = now()
      yield* Deferred.succeed(gates.get(`r${round}-b0`)!, undefined)
      while (!starts.has(probe)) yield* Effect.sleep("1 millis")
      freeToStart.push(starts.get(probe)! - freed)
      arrivalToStart.push(starts.get(probe)! - arrived)
      for (const gate of gates.values()) yield* Deferred.succeed(gate, undefined)
      yield* Effect.sleep("50 millis")
    }
    yield* Scope.close(scope, Exit.void)
    yield* db.query(`DROP SCHEMA ${SchemaName.quote(schema)} CASCADE`)
    return { poolClass, freeToStart, arrivalToStart }
  })

const steadyItems = Number(process.env.BENCH_STEADY_ITEMS ?? 100_000)
const steadyRate = Number(process.env.BENCH_RATE ?? 500)
const steadySeconds = Number(process.env.BENCH_STEADY_SECONDS ?? 300)
const steadyWindow = Number(process.env.BENCH_STEADY_WINDOW ?? 10_000)
/** The producer's fixed period: every 100 ms, the items due by then (50 at 500 a second). */
const steadyPeriodMillis = 100

/** A kind of statement's counters in `pg_stat_statements`, summed over its rows. */
interface Counted {
  readonly calls: number
  readonly ms: number
}

/** One reading of the `steady` part: the deriver's and the producer's counts, and the server's counters. */
interface SteadyReading {
  readonly at: number
  readonly done: number
  readonly enqueued: number
  /** Null when `pg_stat_statements` cannot be read. */
  readonly server: {
    /** The claim inside `queue_claim`: calls of its statement (one of its two walks), time with its due test. */
    readonly claims: Counted
    /** The poller's call of `queue_poll`. */
    readonly poll: Counted
    /** A unit's record alone (`queue_record_done` or `queue_record`). */
    readonly record: Counted
    /** A unit's record that claims along (`queue_record_done` or `queue_record`, then `queue_claim`). */
    readonly along: Counted
    /** The records of many units, with their claim along (`queue_record_units`). */
    readonly units: Counted
    /** JIT-compiled functions in the rows above, and in every statement that names the schema. */
    readonly jitClaim: number
    readonly jitAll: number
  } | null
}

/**
 * The server's version and `jit`, and whether `pg_stat_statements` can be read: loaded at start (its settings exist
 * only then), its extension created in this database when missing. Why not, when it cannot.
 */
const serverInfo = (client: pg.Client) =>
  Effect.promise(async () => {
    const { jit, track, version } = (await client.query<{ version: string; jit: string; track: string | null }>(
      `SELECT current_setting('server_version') AS version, current_setting('jit') AS jit,
              current_setting('pg_stat_statements.track', true) AS track`
    )).rows[0]!
    const unavailable = (why: string) => ({
      version,
      jit,
      statements: false,
      note: `pg_stat_statements unavailable (${why}): the server-side columns are empty`
    })
    if (track === null) return unavailable("not in shared_preload_libraries")
    try {
      await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
      await client.query("SELECT 1 FROM pg_stat_statements LIMIT 1")
    } catch (error) {
      return unavailable(String(error))
    }
    return { version, jit, statements: true, note: `pg_stat_statements.track = ${track}` }
  })

/**
 * Part `steady` (issue #45): a fresh schema whose tables are never analyzed (autovacuum off on both) takes
 * `steadyItems` single-item units at `steadyRate` a second, on a fixed schedule, while one deriver with 8 workers,
 * the production defaults and a no-op handler drains it. Every `steadyWindow` items recorded, a row: the completion
 * and enqueue rates over the window, the backlog, and from `pg_stat_statements` the server time of the claim. With
 * the queue pool, the plans are made on the empty table and kept for the connections' life: the claim's time and
 * the completion rate must stay flat as the table grows. Bounded by `steadySeconds`; the tables' statistics, then
 * one ANALYZE, last.
 */
const steady = (url: string, poolClass: Run["poolClass"]) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_steady_${runs++}`)
    const db = yield* freshQueue(schema)
    const queue = SchemaName.qualify(schema, "queue")
    const tables = [queue, SchemaName.qualify(schema, "active_queue_sessions")]
    for (const table of tables) yield* db.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`)
    // the counters are read on a connection of their own, not one of the deriver's pool
    const client = new pg.Client({ connectionString: url })
    client.on("error", () => {})
    yield* Effect.promise(() => client.connect())
    const ask = <Row>(text: string, values: ReadonlyArray<unknown> = []) =>
      Effect.promise(() => client.query(text, [...values]).then((result) => result.rows as Array<Row>))
    const server = yield* serverInfo(client)
    // the statements, found by their text: the calls as the deriver sends them (top level) by the function they
    // call, the statements inside queue_claim (top level false, track = all) by their opening up to the first WHERE
    // (the server replaces the constants after it with $n)
    const { record, recordDone } = Queue.calls(schema)
    const { poll, recordUnits } = Names.names(schema)
    const opening = (text: string) => text.slice(0, text.indexOf("WHERE")).trim()
    const claimOpening = opening(claimStatements(schema).ready)
    const dueTestOpening = opening(claimStatements(schema).dueTest)
    // a record that claims along, up to its claim's join (the server replaces the constants in the join with $n)
    const alongOpening = (text: string) => text.slice(0, text.indexOf("LEFT JOIN")).trim()
    const kinds = {
      claims: { toplevel: false, is: (text: string) => text.startsWith(claimOpening) },
      dueTest: { toplevel: false, is: (text: string) => text.startsWith(dueTestOpening) },
      poll: { toplevel: true, is: (text: string) => text.includes(`FROM ${poll}(`) },
      record: {
        toplevel: true,
        is: (text: string) =>
          text === `SELECT owned, marked FROM ${recordDone}` || text === `SELECT owned, marked FROM ${record}`
      },
      along: {
        toplevel: true,
        is: (text: string) =>
          text.startsWith(alongOpening(Queue.recordAndClaimSql(schema, "done"))) ||
          text.startsWith(alongOpening(Queue.recordAndClaimSql(schema)))
      },
      units: { toplevel: true, is: (text: string) => text.includes(`FROM ${recordUnits}(`) }
    }
    /** The rows of `pg_stat_statements` whose text names the schema (`rest`: more of the query after WHERE). */
    const statementRows = (rest = "") =>
      ask<{ toplevel: boolean; query: string; calls: number; ms: number; jit: number }>(
        `SELECT toplevel, query, calls::float8 AS calls, total_exec_time AS ms, jit_functions::float8 AS jit
         FROM pg_stat_statements WHERE strpos(query, $1) > 0 ${rest}`,
        [`${SchemaName.quote(schema)}.`]
      )
    const read = (done: number, enqueued: number) =>
      Effect.gen(function*() {
        const at = now()
        if (!server.statements) return { at, done, enqueued, server: null } satisfies SteadyReading
        const rows = yield* statementRows()
        const sum = (kind: keyof typeof kinds) => {
          const of = rows.filter((row) => row.toplevel === kinds[kind].toplevel && kinds[kind].is(row.query.trim()))
          const total = (field: "calls" | "ms" | "jit") => of.reduce((sum, row) => sum + row[field], 0)
          return { calls: total("calls"), ms: total("ms"), jit: total("jit") }
        }
        const claims = sum("claims")
        const dueTest = sum("dueTest")
        const poll = sum("poll")
        const along = sum("along")
        const units = sum("units")
        return {
          at,
          done,
          enqueued,
          server: {
            claims: { calls: claims.calls, ms: claims.ms + dueTest.ms },
            poll,
            record: sum("record"),
            along,
            units,
            jitClaim: claims.jit + dueTest.jit + poll.jit + along.jit + units.jit,
            jitAll: rows.reduce((sum, row) => sum + row.jit, 0)
          }
        } satisfies SteadyReading
      })
    const calls = (delta: Counted) =>
      delta.calls === 0 ? "0" : `${delta.calls.toLocaleString("en")} (${(delta.ms / delta.calls).toFixed(3)})`
    /** A row of the table: the window from one reading to the next (`label`: the first cell instead of done). */
    const row = (from: SteadyReading, to: SteadyReading, label?: string) => {
      const seconds = (to.at - from.at) / 1000
      const minus = (a: Counted, b: Counted) => ({ calls: a.calls - b.calls, ms: a.ms - b.ms })
      let counters = "– | – | – | – | – | – | –"
      if (to.server !== null && from.server !== null) {
        const claims = minus(to.server.claims, from.server.claims)
        counters = `${claims.calls.toLocaleString("en")} | ${
          claims.calls === 0 ? "–" : (claims.ms / claims.calls).toFixed(3)
        } | ${calls(minus(to.server.poll, from.server.poll))} | ${
          calls(minus(to.server.record, from.server.record))
        } | ${calls(minus(to.server.along, from.server.along))} | ${
          calls(minus(to.server.units, from.server.units))
        } | ${to.server.jitClaim - from.server.jitClaim} / ${to.server.jitAll - from.server.jitAll}`
      }
      return log(
        `| ${label ?? to.done.toLocaleString("en")} | ${seconds.toFixed(1)} | ${
          ((to.done - from.done) / seconds).toFixed(0)
        } | ${((to.enqueued - from.enqueued) / seconds).toFixed(0)} | ${
          (to.enqueued - to.done).toLocaleString("en")
        } | ${counters} |`
      )
    }
    const processed = Effect.map(Metric.value(DeriverMetrics.itemsProcessed), (state) => Number(state.count))
    const processedBefore = yield* processed
    const config = yield* Effect.orDie(DeriverConfig.make({ workers: 8, ...productionDefaults }))
    yield* log(
      `steady (issue #45): PostgreSQL ${server.version}, jit ${server.jit}; ${server.note}. Fresh schema ${schema}, ` +
        `autovacuum off on queue and active_queue_sessions: no ANALYZE until the end. One deriver, 8 workers, ` +
        `production defaults, DB_POOL_CLASS=${poolClass}, no-op handler; ${steadyItems.toLocaleString("en")} ` +
        `single-item units at ${steadyRate}/s (every ${steadyPeriodMillis} ms the items due by then), bound ` +
        `${steadySeconds} s.\nDone: items recorded processed (the deriver's deriver_items_processed_total). From ` +
        `pg_stat_statements over each window: claims, the claim's statement inside queue_claim (whichever walk), and ` +
        `its mean server ms with the function's test for a due timed item; the top-level calls with their mean ` +
        `server ms: the poller's queue_poll, a unit's record alone, a unit's record that claims along, and the ` +
        `records of many units (queue_record_units); JIT-compiled functions in the claim's rows, those calls, and ` +
        `every statement that names the schema (0 expected).\n`
    )
    yield* log(
      "| jobs done | window s | done/s | enqueued/s | backlog | claims | ms per claim | poll calls | " +
        "record calls | record+claim calls | records of many units | JIT functions (claim / all) |\n" +
        "|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    const scope = yield* Scope.make()
    yield* Scope.provide(Deriver.start({ schema, handlers: Handlers.make({ noop: () => Effect.void }), config }), scope)
    let enqueued = 0
    const started = now()
    const deadline = started + steadySeconds * 1000
    // a fixed schedule: tick k (k periods after the start) brings the total to what is due by then; a late tick
    // catches up, it does not move the schedule
    const producer = Effect.gen(function*() {
      for (let tick = 1; enqueued < steadyItems; tick++) {
        const wait = started + tick * steadyPeriodMillis - now()
        if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
        const from = enqueued
        const to = Math.min(steadyItems, Math.round((tick * steadyPeriodMillis * steadyRate) / 1000))
        if (to <= from) continue
        yield* db.withConnection((c) =>
          Enqueue.enqueue(
            c,
            schema,
            Array.from(
              { length: to - from },
              (_, i) => ({ workUnitKey: `unit-${from + i}`, taskType: "noop", payload: {} })
            )
          )
        )
        enqueued = to
      }
    })
    const first = yield* read(0, 0)
    const fiber = yield* Effect.forkChild(producer)
    let last = first
    let done = 0
    while (done < steadyItems && now() < deadline) {
      yield* Effect.sleep("20 millis")
      done = (yield* processed) - processedBefore
      if (done >= last.done + steadyWindow || done >= steadyItems) {
        const reading = yield* read(done, enqueued)
        yield* row(last, reading)
        last = reading
      }
    }
    yield* Fiber.interrupt(fiber)
    yield* Scope.close(scope, Exit.void)
    done = (yield* processed) - processedBefore
    if (done > last.done) {
      const reading = yield* read(done, enqueued)
      yield* row(last, reading)
      last = reading
    }
    yield* row(first, last, `all ${done.toLocaleString("en")}`)
    if (done < steadyItems) {
      yield* log(`\ntime bound (${steadySeconds} s) reached: ${done} of ${steadyItems} recorded, ${enqueued} enqueued`)
    }
    if (last.server !== null && last.server.claims.calls === first.server?.claims.calls) {
      yield* log(`\nno row of pg_stat_statements matched the claim inside queue_claim (${server.note})`)
    }
    if (server.statements) {
      const rows = yield* statementRows("AND calls > 1 ORDER BY total_exec_time DESC LIMIT 10")
      yield* log(
        "\nthe statements that name the schema, called more than once, by total time\n\n| top level | calls | ms each | JIT functions | text |\n" +
          "|---|---|---|---|---|\n" +
          rows.map((r) =>
            `| ${r.toplevel} | ${r.calls} | ${(r.ms / r.calls).toFixed(3)} | ${r.jit} | ${
              JSON.stringify(r.query.replace(/\s+/g, " ").slice(0, 100))
            } |`
          ).join("\n")
      )
    }
    const [count] = yield* ask<{ processed: number; rows: number }>(
      `SELECT count(*) FILTER (WHERE processed)::int AS processed, count(*)::int AS rows FROM ${queue}`
    )
    yield* log(`\nthe queue: ${count!.processed} of ${count!.rows} rows processed`)
    // the deriver's backends report their counts to the statistics within a second or so of going idle
    yield* Effect.sleep("2 seconds")
    const time = (value: unknown) => value instanceof Date ? value.toISOString() : "–"
    const statistics = (title: string) =>
      Effect.gen(function*() {
        const rows = yield* ask<Record<string, unknown>>(
          `SELECT relname, n_live_tup, n_dead_tup, last_analyze, last_autoanalyze FROM pg_stat_user_tables
           WHERE schemaname = $1 AND relname IN ('queue', 'active_queue_sessions') ORDER BY relname`,
          [schema]
        )
        yield* log(
          `\n${title}\n\n| relname | n_live_tup | n_dead_tup | last_analyze | last_autoanalyze |\n|---|---|---|---|---|\n` +
            rows.map((r) =>
              `| ${r.relname} | ${r.n_live_tup} | ${r.n_dead_tup} | ${time(r.last_analyze)} | ${
                time(r.last_autoanalyze)
              } |`
            ).join("\n")
        )
      })
    yield* statistics("pg_stat_user_tables at the end, before any ANALYZE (the plans above never saw statistics)")
    for (const table of tables) yield* ask(`ANALYZE ${table}`)
    yield* statistics("after ANALYZE")
    yield* Effect.promise(() => client.end())
    yield* db.query(`DROP SCHEMA ${SchemaName.quote(schema)} CASCADE`)
  })

const program = Effect.gen(function*() {
  const scope = yield* Scope.make()
  let url = process.env.DATABASE_URL
  if (url === undefined || url === "") {
    yield* log("starting an embedded PostgreSQL cluster…")
    // pg_stat_statements (statements inside functions too) only for part `steady`: the other parts' figures are
    // measured without its work on every statement
    const statements = parts.has("steady")
      ? { preload: ["pg_stat_statements"], settings: { "pg_stat_statements.track": "all" } }
      : {}
    url = (yield* Scope.provide(Cluster.start({ maxConnections: 100, ...statements }), scope)).url
  }
  const dbUrl = url
  const claim = parts.has("claim")
    ? yield* claimBenchmark(dbUrl).pipe(Effect.provide(session(dbUrl, "queue")))
    : undefined
  if (claim !== undefined) {
    yield* log(`claim query: ${processedRows.toLocaleString("en")} processed rows + ${pendingRows} pending, one tenant`)
    yield* log("\nclaim plan (partial index):\n" + claim.plan.split("\n").map((l) => "  " + l).join("\n"))
    yield* log(
      "\nclaim plan without the partial index (dropped in a rolled-back transaction):\n" +
        claim.seqPlan.split("\n").slice(0, 12).map((l) => "  " + l).join("\n")
    )
  }

  if (parts.has("retries")) {
    const waiting = yield* waitingBenchmark.pipe(Effect.provide(session(dbUrl, "queue")))
    const show = (title: string, run: { plan: string; times: ReadonlyArray<number> }) =>
      log(
        `\n${title}: median ${median(run.times).toFixed(3)} ms, p95 ${
          percentile(run.times, 0.95).toFixed(3)
        } ms over ${run.times.length}\n` +
          run.plan.split("\n").map((l) => "  " + l).join("\n")
      )
    yield* show(
      `claim with ${waitingRows.toLocaleString("en")} items waiting for a retry (older ids) + ${pendingRows} pending`,
      waiting.waiting
    )
    yield* show("the same without queue migration 8's indexes (rolled back)", waiting.unindexed)
    yield* show(
      `the same with one later item behind each waiting item (enqueued while it waits: it takes its time)`,
      waiting.behind
    )
    yield* log(
      `\nqueue_claim(8, …, 20 items, now) as the deriver calls it (generic plan), same data: median ${
        median(waiting.functionTimes).toFixed(3)
      } ms, p95 ${percentile(waiting.functionTimes, 0.95).toFixed(3)} ms over ${waiting.functionTimes.length}`
    )
  }

  const results: Array<Run> = []
  if (parts.has("throughput")) {
    for (const prefetch of prefetches) {
      for (const label of labels) {
        for (const unitSize of unitSizes) {
          for (const poolClass of pools) {
            for (const workers of workerCounts) {
              yield* log(
                `throughput (${label}, prefetch ${
                  prefetch ?? "default"
                }): ${throughputItems} no-op items in units of ${unitSize}, ` +
                  `WORKERS=${workers}, DB_POOL_CLASS=${poolClass}…`
              )
              const run = yield* throughput(label, poolClass, workers, unitSize, prefetch).pipe(
                Effect.provide(session(dbUrl, poolClass))
              )
              yield* log(`  ${(run.items / run.seconds).toFixed(0)} items/s`)
              const { busy, claimed, empty, error, units: polled } = run.polls
              yield* log(
                `  polls: ${claimed} claimed ${polled} units, ${empty} empty, ${busy} busy, ${error} failed; ` +
                  `${Math.ceil(throughputItems / unitSize) - polled} units claimed along`
              )
              results.push(run)
            }
          }
        }
      }
    }
  }
  const latencies: Array<Effect.Success<ReturnType<typeof busyLatency>>> = []
  if (parts.has("latency")) {
    for (const poolClass of pools) {
      yield* log(`latency of a unit arriving while all 8 workers are busy (defaults, DB_POOL_CLASS=${poolClass})…`)
      latencies.push(yield* busyLatency(poolClass, latencyRounds).pipe(Effect.provide(session(dbUrl, poolClass))))
    }
  }
  const bare: Array<Effect.Success<ReturnType<typeof statements>>> = []
  if (parts.has("statements")) {
    for (const mode of ["along", "functions", "unnamed", "named"] as const) {
      yield* log(`the unit's statements on a bare pg.Client, ${statementModes[mode]}…`)
      bare.push(yield* statements(dbUrl, throughputItems, mode).pipe(Effect.provide(session(dbUrl, "queue"))))
    }
  }
  const fmt = (ms: number) => `${ms.toFixed(3)} ms`
  if (claim !== undefined) {
    yield* log("\n| measurement | value |\n|---|---|")
    yield* log(
      `| claim reads only the partial indexes (queue_ready_id_idx, no Seq Scan on queue) | ${
        claim.usesIndex ? "yes" : "NO"
      } |`
    )
    yield* log(`| claim execution time, partial index (median of 20) | ${fmt(median(claim.withIndex))} |`)
    yield* log(`| claim execution time, partial index (p95 of 20) | ${fmt(percentile(claim.withIndex, 0.95))} |`)
    yield* log(`| claim execution time without the index (median of 5) | ${fmt(median(claim.withoutIndex))} |`)
  }
  // the tables of the parts that ran
  if (parts.has("throughput")) {
    yield* log(
      "\nno-op throughput (defaults = production defaults: base 1 s, max 30 s, jitter 0.5, batch 20, startup" +
        " jitter off; tuned = base 0.01 s, max 0.1 s; prefetch: units claimed beyond the workers, by default 8 per worker)\n"
    )
    yield* log(
      "| settings | prefetch | DB_POOL_CLASS | WORKERS | items per unit | items recorded | seconds | items/s | units/s |" +
        " checkouts / unit |\n" +
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    for (const run of results) {
      const rate = run.items / run.seconds
      yield* log(
        `| ${run.label} | ${run.prefetch} | ${run.poolClass} | ${run.workers} | ${run.unitSize} | ${run.items} | ${
          run.seconds.toFixed(2)
        } | ${rate.toFixed(0)} | ${(rate / run.unitSize).toFixed(0)} | ${
          (run.checkouts / (run.items / run.unitSize)).toFixed(2)
        } |`
      )
    }
  }
  if (parts.has("latency")) {
    yield* log(`\nunit arriving while all 8 workers are busy (defaults, ${latencyRounds} rounds)\n`)
    yield* log(
      "| DB_POOL_CLASS | worker freed → probe starts (median / max) | probe enqueued → starts (median) |\n|---|---|---|"
    )
    for (const { arrivalToStart, freeToStart, poolClass } of latencies) {
      yield* log(
        `| ${poolClass} | ${fmt(median(freeToStart))} / ${fmt(Math.max(...freeToStart))} | ${
          fmt(median(arrivalToStart))
        } (100 ms of it waiting for the worker) |`
      )
    }
  }
  if (bare.length > 0) {
    yield* log(
      `\nthe unit's statements alone, ${throughputItems} single-item units one at a time, one bare pg.Client\n`
    )
    yield* log("| statements | units/s | claim (mean) | record (mean) | SELECT 1 (mean) |\n|---|---|---|---|---|")
    for (const run of bare) {
      yield* log(
        `| ${statementModes[run.mode]} | ${(run.units / run.seconds).toFixed(0)} | ${fmt(run.claimMillis)} | ${
          fmt(run.recordMillis)
        } | ${fmt(run.roundTripMillis)} |`
      )
    }
  }
  if (parts.has("steady")) {
    for (const poolClass of pools) {
      yield* log("")
      yield* steady(dbUrl, poolClass).pipe(Effect.provide(session(dbUrl, poolClass)))
    }
  }
  yield* Scope.close(scope, Exit.void)
})

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
