/**
 * The deriver as an adapter of the third-party harness hardbyte/postgresql-job-queue-benchmarking: one long-running
 * process that speaks the harness's JSONL contract (its CONTRIBUTING_ADAPTERS.md, "Runtime contract"). Environment in:
 * DATABASE_URL, SCENARIO (long_horizon), PRODUCER_MODE (fixed), PRODUCER_RATE, PRODUCER_BATCH_MAX, PRODUCER_BATCH_MS,
 * PRODUCER_RATE_CONTROL_FILE (optional: a number read every tick replaces the rate), WORKER_COUNT, JOB_PAYLOAD_BYTES,
 * JOB_WORK_MS, SAMPLE_EVERY_S. Stdout: a descriptor line at start, then every SAMPLE_EVERY_S (aligned to the wall
 * clock) one line per metric: claim_p50/p95/p99_ms (insert to handler start, rolling 30 s), end_to_end_p50/p95/p99_ms,
 * enqueue_rate, completion_rate, queue_depth, producer_target_rate. Stderr: logs. SIGTERM: graceful stop, exit 0.
 *
 * The deriver is used as a user uses it: the queue's tables by its migrations (`QueueSchema.component`), jobs
 * through `Enqueue.enqueue` on a session of the producer's own, each job its own work unit, the deriver started with
 * `Deriver.start` on `DeriverConfig`'s defaults except WORKER_COUNT workers and no startup jitter (a harness run is
 * one process, not a fleet restarting together), and woken after each committed enqueue (the running deriver's `wake`, what the
 * API does through `@resilience/wake`).
 *
 *   DATABASE_URL=postgres://… WORKER_COUNT=8 PRODUCER_RATE=500 \
 *     node --conditions=@resilience/source labs/job-queue-harness/src/adapter.ts
 */
import { NodeRuntime } from "@effect/platform-node"
import { DbConfig, DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Enqueue, Handlers, Maintenance, type Queue, QueueSchema } from "@resilience/deriver"
import { Migrator, SchemaName } from "@resilience/schema"
import { Duration, Effect, Layer, Logger, Metric, Runtime } from "effect"
import { readFileSync } from "node:fs"

const system = "resilience-deriver"
const taskType = "harness_job"
const windowSeconds = 30

const envNumber = (key: string, fallback: number): number => {
  const value = Number(process.env[key])
  return process.env[key] === undefined || !Number.isFinite(value) ? fallback : value
}

const url = process.env.DATABASE_URL
if (url === undefined) throw new Error("DATABASE_URL must be set")
const scenario = process.env.SCENARIO ?? "long_horizon"
if (scenario !== "long_horizon") throw new Error(`unsupported SCENARIO ${scenario}`)
if ((process.env.PRODUCER_MODE ?? "fixed") !== "fixed") throw new Error("only PRODUCER_MODE=fixed is implemented")
const settings = {
  rate: envNumber("PRODUCER_RATE", 800),
  batchMax: envNumber("PRODUCER_BATCH_MAX", 128),
  batchMillis: envNumber("PRODUCER_BATCH_MS", 10),
  workers: envNumber("WORKER_COUNT", 8),
  payloadBytes: envNumber("JOB_PAYLOAD_BYTES", 256),
  workMillis: envNumber("JOB_WORK_MS", 1),
  sampleEverySeconds: envNumber("SAMPLE_EVERY_S", 5)
}
const schema = SchemaName.makeUnsafe(process.env.DERIVER_SCHEMA ?? "harness")
const dbName = new URL(url).pathname.slice(1)
const instanceId = envNumber("BENCH_INSTANCE_ID", 0)
/** ADAPTER_WAKE=false (a diagnostic): no wake after an enqueue, pickup by the poll schedule alone. */
const wakeAfterEnqueue = process.env.ADAPTER_WAKE !== "false"
/**
 * ADAPTER_WORK (a diagnostic): how a job's JOB_WORK_MS is spent. `timer` (the default): one timer per job, whose
 * lateness that job pays (at 6,000 jobs/s offered, a 1 ms timer took 1.33–1.40 ms on average, and 1.8–2.4 ms before
 * the deriver's records were answered in slices; `ADAPTER_PROBE` prints it). `paced`: JOB_WORK_MS per job on average:
 * what earlier timers slept beyond their time pays part of the next jobs' work. The harness's pg-boss adapter sleeps
 * once per batch (`workMs × jobs.length`), so its jobs share one timer's lateness within a batch.
 */
const workMode = process.env.ADAPTER_WORK ?? "timer"
if (workMode !== "paced" && workMode !== "timer") {
  throw new Error(`ADAPTER_WORK must be timer or paced, not ${workMode}`)
}
/**
 * ADAPTER_PROBE=true (a diagnostic): once a sample period, a line on stderr saying what bounds the handlers: how many
 * ran on average (of WORKER_COUNT) and how long a job's JOB_WORK_MS took on average. Slots nearly all taken with the
 * work taking longer than JOB_WORK_MS: the handlers' timers (the event loop's delay) bound the rate; slots often free:
 * the units reach the handlers too slowly (claims and records).
 */
const probing = process.env.ADAPTER_PROBE === "true"
/** ADAPTER_PREFETCH (a diagnostic): `DERIVER_PREFETCH`'s value instead of its default (8 per worker). */
const prefetch = process.env.ADAPTER_PREFETCH === undefined ? undefined : envNumber("ADAPTER_PREFETCH", 0)

const emit = (record: Record<string, unknown>) =>
  Effect.sync(() => process.stdout.write(`${JSON.stringify({ ...record, instance_id: instanceId })}\n`))
const warn = (line: string) => Effect.sync(() => process.stderr.write(`[${system}] ${line}\n`))

/** The rate now: the control file's number when it names one, else PRODUCER_RATE. */
const targetRate = (): number => {
  const path = process.env.PRODUCER_RATE_CONTROL_FILE
  if (path === undefined) return settings.rate
  try {
    const value = Number(readFileSync(path, "utf8").trim())
    return Number.isFinite(value) && value >= 0 ? value : settings.rate
  } catch {
    return settings.rate
  }
}

// Rolling 30 s windows with bounded memory (at most 32,768 observations, as the pg-boss adapter's window).
const latency = (name: string) =>
  Metric.summary(name, { maxAge: Duration.seconds(windowSeconds), maxSize: 32_768, quantiles: [0.5, 0.95, 0.99] })
const claimLatency = latency("harness_claim_ms")
const endToEndLatency = latency("harness_end_to_end_ms")

const counts = { enqueued: 0, completed: 0, depth: 0, rate: settings.rate }

/** The handlers running now, and since the last probe line: the integral of that count over time, and the work done. */
const handlers = { running: 0, changedAt: 0, runningMillis: 0, workMillis: 0, jobs: 0, since: performance.now() }

/** The running count changes by `delta` at `now` (ADAPTER_PROBE). */
const handlersChange = (now: number, delta: number) => {
  handlers.runningMillis += handlers.running * (now - handlers.changedAt)
  handlers.changedAt = now
  handlers.running += delta
}

/** The probe's line for the time since the last one, and a new period (ADAPTER_PROBE). */
const probeLine = (): string => {
  const now = performance.now()
  handlersChange(now, 0)
  const line = `probe: ${(handlers.runningMillis / (now - handlers.since)).toFixed(2)} of ${settings.workers} handlers `
    + `running on average; JOB_WORK_MS (${settings.workMillis}) took ${
      (handlers.workMillis / Math.max(handlers.jobs, 1)).toFixed(3)
    } ms a job on average (${handlers.jobs} jobs)`
  Object.assign(handlers, { runningMillis: 0, workMillis: 0, jobs: 0, since: now })
  return line
}

/** What timers slept beyond their time and later jobs have not used yet (ADAPTER_WORK=paced), in milliseconds. */
let workPaid = 0

/** JOB_WORK_MS of work: a sleep of what earlier late timers have not paid already (ADAPTER_WORK). */
const work = Effect.suspend(() => {
  if (workMode === "timer") return Effect.sleep(Duration.millis(settings.workMillis))
  const paid = Math.min(workPaid, settings.workMillis)
  workPaid -= paid
  const owed = settings.workMillis - paid
  if (owed === 0) return Effect.void
  const started = performance.now()
  return Effect.andThen(
    Effect.sleep(Duration.millis(owed)),
    Effect.sync(() => {
      workPaid += performance.now() - started - owed
    })
  )
})

/** One job: its pickup latency, JOB_WORK_MS of work, its end-to-end latency. */
const handle = (item: Queue.Item) =>
  Effect.gen(function*() {
    const enqueuedAt = (item.payload as { enqueued_at_ms?: unknown } | null)?.enqueued_at_ms
    const started = Date.now()
    if (typeof enqueuedAt === "number") yield* Metric.update(claimLatency, started - enqueuedAt)
    const workStarted = probing ? performance.now() : 0
    if (probing) handlersChange(workStarted, 1)
    if (settings.workMillis > 0) yield* work
    if (probing) {
      const now = performance.now()
      handlersChange(now, -1)
      handlers.workMillis += now - workStarted
      handlers.jobs += 1
    }
    if (typeof enqueuedAt === "number") yield* Metric.update(endToEndLatency, Date.now() - enqueuedAt)
    counts.completed += 1
  })

const quantile = (state: Metric.SummaryState, q: number) => state.quantiles.find(([at]) => at === q)?.[1] ?? 0

/** Every SAMPLE_EVERY_S from the next wall-clock boundary: one line per metric. */
const sampler = Effect.gen(function*() {
  const period = settings.sampleEverySeconds * 1000
  yield* Effect.sleep(Duration.millis(period - (Date.now() % period)))
  let last = { enqueued: counts.enqueued, completed: counts.completed }
  while (true) {
    const t = new Date().toISOString()
    const claim = yield* Metric.value(claimLatency)
    const endToEnd = yield* Metric.value(endToEndLatency)
    const now = { enqueued: counts.enqueued, completed: counts.completed }
    const metrics: ReadonlyArray<readonly [string, number, number]> = [
      ["claim_p50_ms", quantile(claim, 0.5), windowSeconds],
      ["claim_p95_ms", quantile(claim, 0.95), windowSeconds],
      ["claim_p99_ms", quantile(claim, 0.99), windowSeconds],
      ["end_to_end_p50_ms", quantile(endToEnd, 0.5), windowSeconds],
      ["end_to_end_p95_ms", quantile(endToEnd, 0.95), windowSeconds],
      ["end_to_end_p99_ms", quantile(endToEnd, 0.99), windowSeconds],
      ["enqueue_rate", (now.enqueued - last.enqueued) / settings.sampleEverySeconds, settings.sampleEverySeconds],
      ["completion_rate", (now.completed - last.completed) / settings.sampleEverySeconds, settings.sampleEverySeconds],
      ["queue_depth", counts.depth, 0],
      ["producer_target_rate", counts.rate, 0]
    ]
    last = now
    for (const [metric, value, window_s] of metrics) {
      yield* emit({ t, system, kind: "adapter", subject_kind: "adapter", subject: "", metric, value, window_s })
    }
    if (probing) yield* warn(probeLine())
    yield* Effect.sleep(Duration.millis(period - (Date.now() % period)))
  }
})

const program = Effect.gen(function*() {
  // the producer's and observer's session: the deriver's pool is its own, as an API's would be
  const producerContext = yield* Layer.build(
    DbSession.layer({ ...DbConfig.defaults, url, poolClass: "queue", poolSize: 2, applicationName: "harness-producer" })
  )
  const onProducer = <A, E>(effect: Effect.Effect<A, E, DbSession>) => Effect.provideContext(effect, producerContext)
  yield* onProducer(Migrator.run(schema, [QueueSchema.component]))
  yield* emit({
    kind: "descriptor",
    system,
    event_tables: [`${schema}.queue`, `${schema}.active_queue_sessions`],
    extensions: [],
    version: "@resilience/deriver (workspace source)",
    schema_version: String(QueueSchema.migrations.length),
    db_name: dbName,
    started_at: new Date().toISOString()
  })
  const config = yield* DeriverConfig.make({
    workers: settings.workers,
    pollingStartupJitterSeconds: 0,
    ...(prefetch === undefined ? {} : { prefetch })
  })
  const deriver = yield* Deriver.start({ schema, handlers: Handlers.make({ [taskType]: handle }), config })

  const padding = "x".repeat(Math.max(0, settings.payloadBytes - 96))
  let seq = 0
  let failedEnqueues = 0
  const run = `${process.pid}-${Date.now()}`
  // credit on real elapsed wall-clock time (the contract's "Producer pacing"), at most PRODUCER_BATCH_MAX a tick
  const producer = Effect.gen(function*() {
    let credit = 0
    let lastTick = performance.now()
    while (true) {
      const now = performance.now()
      counts.rate = targetRate()
      credit += (counts.rate * (now - lastTick)) / 1000
      lastTick = now
      const whole = Math.min(Math.floor(credit), settings.batchMax)
      if (whole > 0) {
        const items = Array.from({ length: whole }, () => {
          seq += 1
          return {
            workUnitKey: `job:${run}:${seq}`,
            taskType,
            payload: { seq, enqueued_at_ms: Date.now(), payload_padding: padding }
          }
        })
        const inserted = yield* onProducer(
          DbSession.use((db) => db.withConnection((c) => Enqueue.enqueue(c, schema, items)))
        )
          .pipe(
            Effect.catchCause((cause) =>
              Effect.as(
                Effect.andThen(warn(`enqueue failed: ${String(cause).split("\n")[0]}`), Effect.sleep("200 millis")),
                0
              )
            )
          )
        if (inserted === 0) failedEnqueues += 1
        else {
          credit -= inserted
          counts.enqueued += inserted
          const decision = wakeAfterEnqueue ? yield* deriver.wake : "off"
          // after the producer's own writes failed: what the first wake did (the evidence the deriver got, or not)
          if (failedEnqueues > 0) {
            yield* warn(`enqueue succeeded after ${failedEnqueues} failed; wake: ${decision}`)
            failedEnqueues = 0
          }
        }
      }
      const spent = performance.now() - now
      yield* Effect.sleep(Duration.millis(Math.max(0, settings.batchMillis - spent)))
    }
  })
  // The depth, sampled once a sample period, a quarter second before its line: `Maintenance.depth` counts the
  // due items (up to the cap), so its cost grows with the backlog (40 ms at 40,000 due here), where pg-boss's
  // adapter reads a count pg-boss keeps; four samples a second cost the deriver's server 15 % of a core.
  const depth = Effect.gen(function*() {
    const period = settings.sampleEverySeconds * 1000
    while (true) {
      yield* Effect.sleep(Duration.millis((period - ((Date.now() + 250) % period)) % period))
      yield* onProducer(DbSession.use((db) => db.withConnection((c) => Maintenance.depth(c, schema, 10_000_000)))).pipe(
        Effect.tap((found) => Effect.sync(() => (counts.depth = found.due))),
        Effect.ignore
      )
      yield* Effect.sleep("500 millis")
    }
  })
  yield* Effect.all([producer, depth, sampler], { concurrency: "unbounded", discard: true })
})

const session = DbSession.layer({ ...DbConfig.defaults, url, poolClass: "queue", applicationName: "harness-deriver" })

// stdout is the harness's telemetry: the logs go to stderr
const logs = Logger.layer([Logger.withConsoleError(Logger.formatSimple)])

// the contract: exit 0 on SIGTERM (the default teardown reports an interrupted program with 130)
const teardown: Runtime.Teardown = (exit, onExit) =>
  Runtime.defaultTeardown(exit, (code) => onExit(code === 130 ? 0 : code))

NodeRuntime.runMain(program.pipe(Effect.scoped, Effect.provide(session), Effect.orDie, Effect.provide(logs)), {
  teardown
})
