/**
 * Benchmark (not a test): concurrent HTTP clients against the real API entry point (its own process), with a
 * counting TCP proxy in front of PostgreSQL, production defaults first (admission gate on with its defaults,
 * `DB_POOL_CLASS=null`), the gate off (`API_ADMISSION_ENABLED=false`, the behaviour before it) second.
 *
 *  1. Saturated database (every slot held by someone else), `BENCH_SATURATED_SECONDS` (20): `BENCH_CLIENTS` (200)
 *     clients on `GET …/queue` and `BENCH_HEALTHZ_CLIENTS` (10) on `/healthz` at the same time: p99 of the 503s vs
 *     p99 of `/healthz` in the same run, and connection attempts per second vs the bound the settings imply.
 *  2. Healthy database, the same clients, `BENCH_SECONDS` (10) per API: throughput with the gate vs without, and
 *     what the gate shed.
 *  3. Recovery: load running, saturate for 5 s, release; time from the release until the gate serves 2xx again,
 *     vs 2 × the open window.
 *
 * `outage` mode (`npm run bench:outage -w @resilience/api-app`): one instance, `BENCH_OUTAGE_CLIENTS` (20) clients
 * on the data route, the database saturated `BENCH_OUTAGE_SECONDS` (120), then released and watched
 * `BENCH_AFTER_SECONDS` (60) more: connection attempts in the last 60 s of the outage (target ≤ 4) and the time
 * from the release to the first 2xx (target ≤ 1.5 × `API_ADMISSION_OPEN_MAX_MILLIS`), with the defaults and with
 * the cap set to the first window (`API_ADMISSION_OPEN_MAX_MILLIS=1000`: the constant window before the backoff).
 * Bounded by `BENCH_OUTAGE_MAX_REQUESTS` (3,000,000) responses per run.
 *
 * Loopback only; every phase is bounded in time and in request count. Prints progress and a summary.
 *
 *   npm run bench -w @resilience/api-app
 *   npm run bench:outage -w @resilience/api-app
 *   BENCH_CLIENTS=200 BENCH_SATURATED_SECONDS=20 BENCH_SECONDS=10 npm run bench -w @resilience/api-app
 *   BENCH_TRACE=1 …   # also prints the gate's metrics every second after the release
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Breaker, Settings as Admission } from "@resilience/admission"
import { ApiClient } from "@resilience/api-client"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy, EntryPoint } from "@resilience/test-db"
import { Effect, Logger, References, type Scope } from "effect"
import { FetchHttpClient, type HttpClient } from "effect/http"
import { Stats } from "../../../packages/bench-kit/src/index.ts"

const clients = Number(process.env.BENCH_CLIENTS ?? 200)
const healthzClients = Number(process.env.BENCH_HEALTHZ_CLIENTS ?? 10)
const saturatedSeconds = Number(process.env.BENCH_SATURATED_SECONDS ?? 20)
const seconds = Number(process.env.BENCH_SECONDS ?? 10)
const maxRequests = Number(process.env.BENCH_MAX_REQUESTS ?? 400_000)
const maxConnections = 260
const adminToken = "bench-admin-token-0123456789"
const defaults = Admission.defaults

/** One response: when it arrived (ms since the phase started), its status and its latency. */
interface Sample {
  readonly at: number
  readonly status: number
  readonly millis: number
  /** `Retry-After` of a 503, in seconds. */
  readonly retryAfter?: number | undefined
}

interface Run {
  readonly samples: Array<Sample>
  readonly seconds: number
}

const statuses = (samples: ReadonlyArray<Sample>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const sample of samples) counts[sample.status] = (counts[sample.status] ?? 0) + 1
  return counts
}

/** `concurrency` loops, each sending one request after the other to `url`, until `until` resolves or the budget is spent. */
const load = (
  name: string,
  url: string,
  token: string,
  concurrency: number,
  until: Promise<unknown>,
  startedAt = performance.now(),
  budget = maxRequests
): Promise<Run> => {
  const samples: Array<Sample> = []
  const failures: Array<string> = []
  const state = { done: false }
  void until.then(() => {
    state.done = true
  })
  const progress = setInterval(() => {
    const elapsed = (performance.now() - startedAt) / 1000
    console.log(
      `  [${name}] ${elapsed.toFixed(1)} s: ${samples.length} responses ${JSON.stringify(statuses(samples))}${
        failures.length > 0 ? ` (${failures.length} failed, e.g. ${failures[0]})` : ""
      }`
    )
  }, 2000)
  const client = async () => {
    while (!state.done && samples.length < budget) {
      const t0 = performance.now()
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } }).catch((error) => {
        failures.push(String(error?.cause ?? error))
        return undefined
      })
      await response?.arrayBuffer()
      // A failed fetch can reject without a macrotask; yield so timers (the deadline, the progress) still run.
      if (response === undefined) await sleep(10)
      const now = performance.now()
      const retryAfter = response?.headers.get("retry-after")
      samples.push({
        at: now - startedAt,
        status: response?.status ?? 0,
        millis: now - t0,
        retryAfter: retryAfter === null || retryAfter === undefined ? undefined : Number(retryAfter)
      })
    }
  }
  return Promise.all(Array.from({ length: concurrency }, client)).then(() => {
    clearInterval(progress)
    return { samples, seconds: (performance.now() - startedAt) / 1000 }
  })
}

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

/** A readiness wait is one long poll, not a fleet's retries: it gets a budget that does not run out. */
const waiting = { maxTokens: 1_000_000, ratio: 1 }

/** Spawns the real entry point with `env` on top of the bench's own settings; returns once it is ready. */
const startApi = (url: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const baseUrl = yield* EntryPoint.api({
      url,
      schema: "bench",
      adminToken,
      logLevel: "Error",
      env: { DB_POOL_CLASS: "null", ...env }
    })
    // ready, not only alive: the schema is migrated in the background after the server listens
    const client = yield* ApiClient.make({ baseUrl, maxAttempts: 100, maxDelay: "1 second", budget: waiting }).pipe(
      Effect.orDie
    )
    yield* Effect.orDie(client.readyz)
    return { baseUrl, client }
  })

/** The `admission_*` series of an API's `/metrics`, one line each. */
const admissionMetrics = (api: string) =>
  Effect.promise(() =>
    fetch(`${api}/metrics`).then((r) => r.text()).then((text) =>
      text.split("\n").filter((line) => line.startsWith("admission_") && !line.startsWith("admission_circuit_t"))
    )
  )

/** Connection attempts per whole second while `run` runs (sampled at the proxy). */
const attemptsPerSecond = (proxy: CountingProxy.CountingProxy, running: () => boolean) =>
  Effect.promise(async () => {
    const series: Array<number> = []
    let last = await Effect.runPromise(proxy.attempts)
    while (running()) {
      await sleep(1000)
      const now = await Effect.runPromise(proxy.attempts)
      series.push(now - last)
      last = now
    }
    return series
  })

const saturatedPhase = (name: string, api: string, token: string, proxy: CountingProxy.CountingProxy) =>
  Effect.gen(function*() {
    const startedAt = performance.now()
    const until = sleep(saturatedSeconds * 1000)
    let running = true
    void until.then(() => (running = false))
    const before = yield* proxy.attempts
    const [db, healthz, series] = yield* Effect.all([
      Effect.promise(() => load(name, `${api}/v1/workspaces/bench/queue`, token, clients, until, startedAt)),
      Effect.promise(() => load(`${name}/healthz`, `${api}/healthz`, token, healthzClients, until, startedAt)),
      attemptsPerSecond(proxy, () => running)
    ], { concurrency: "unbounded" })
    const attempts = (yield* proxy.attempts) - before
    const unavailable = db.samples.filter((sample) => sample.status === 503).map((sample) => sample.millis)
    const ok = healthz.samples.filter((sample) => sample.status === 200).map((sample) => sample.millis)
    return {
      name,
      requests: db.samples.length,
      seconds: db.seconds,
      statuses: statuses(db.samples),
      p50_503: Stats.median(unavailable),
      p99_503: Stats.quantile(unavailable, 0.99),
      healthzRequests: ok.length,
      p50_healthz: Stats.median(ok),
      p99_healthz: Stats.quantile(ok, 0.99),
      attempts,
      series,
      metrics: yield* admissionMetrics(api)
    }
  })

const healthyPhase = (name: string, api: string, token: string, proxy: CountingProxy.CountingProxy) =>
  Effect.gen(function*() {
    yield* Effect.promise(() =>
      load(`${name} warm-up`, `${api}/v1/workspaces/bench/queue`, token, clients, sleep(3000))
    )
    const before = yield* proxy.attempts
    const run = yield* Effect.promise(() =>
      load(name, `${api}/v1/workspaces/bench/queue`, token, clients, sleep(seconds * 1000))
    )
    const millis = run.samples.map((sample) => sample.millis)
    return {
      name,
      requests: run.samples.length,
      perSecond: run.samples.length / run.seconds,
      statuses: statuses(run.samples),
      p50: Stats.median(millis),
      p99: Stats.quantile(millis, 0.99),
      attempts: (yield* proxy.attempts) - before,
      metrics: yield* admissionMetrics(api)
    }
  })

const program = Effect.gen(function*() {
  console.log(
    `bench: ${clients} clients (+ ${healthzClients} on /healthz while saturated), saturated ${saturatedSeconds} s, healthy ${seconds} s per API; loopback only`
  )
  console.log(`gate defaults: ${JSON.stringify(defaults)}`)
  const cluster = yield* Cluster.start({ maxConnections })
  const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
  const { baseUrl: gated, client } = yield* startApi(proxy.url(cluster.url), {})
  const { baseUrl: ungated } = yield* startApi(proxy.url(cluster.url), { API_ADMISSION_ENABLED: "false" })
  const { token } = yield* Effect.orDie(client.createWorkspace({ adminToken, name: "bench" }))

  console.log("phase 1: healthy database, gate on (defaults) and off, in the order on, off, off, on (against drift)")
  const rounds: Array<Effect.Success<ReturnType<typeof healthyPhase>>> = []
  for (
    const [name, api] of [
      ["healthy, gate on", gated],
      ["healthy, gate off", ungated],
      ["healthy, gate off", ungated],
      ["healthy, gate on", gated]
    ] as const
  ) {
    rounds.push(yield* healthyPhase(name, api, token, proxy))
  }
  const healthy = ["healthy, gate on", "healthy, gate off"].map((name) => {
    const mine = rounds.filter((round) => round.name === name)
    const counts: Record<string, number> = {}
    for (const round of mine) {
      for (const [status, n] of Object.entries(round.statuses)) counts[status] = (counts[status] ?? 0) + n
    }
    return {
      name: `${name} (2 × ${seconds} s)`,
      requests: mine.reduce((sum, round) => sum + round.requests, 0),
      perSecond: mine.reduce((sum, round) => sum + round.perSecond, 0) / mine.length,
      statuses: counts,
      p50: Math.max(...mine.map((round) => round.p50)),
      p99: Math.max(...mine.map((round) => round.p99)),
      attempts: mine.reduce((sum, round) => sum + round.attempts, 0),
      metrics: mine.at(-1)!.metrics
    }
  })

  console.log("phase 2: saturated database")
  const saturated = yield* Effect.scoped(Effect.gen(function*() {
    const { held } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
    console.log(`  holding ${held} of max_connections=${maxConnections}`)
    const on = yield* saturatedPhase("saturated, gate on (defaults)", gated, token, proxy)
    const off = yield* saturatedPhase("saturated, gate off", ungated, token, proxy)
    return [on, off]
  }))

  console.log("phase 3: recovery (gate on): load, saturate 5 s, release, 10 s more")
  const recovery = yield* Effect.gen(function*() {
    const startedAt = performance.now()
    const release: { at?: number; done?: number } = {}
    const driver = Effect.scoped(Effect.gen(function*() {
      yield* Effect.promise(() => sleep(1000))
      const saturation = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
      yield* Effect.promise(() => sleep(5000))
      release.at = performance.now() - startedAt
      yield* Effect.orDie(saturation.release)
      release.done = performance.now() - startedAt
      for (let i = 0; i < 10; i++) {
        yield* Effect.promise(() => sleep(1000))
        if (process.env.BENCH_TRACE !== undefined) {
          console.log(`  [recovery +${i + 1} s] ${(yield* admissionMetrics(gated)).join("; ")}`)
        }
      }
    }))
    let stop: () => void = () => undefined
    const until = new Promise<void>((resolve) => (stop = resolve))
    const [run] = yield* Effect.all([
      Effect.promise(() => load("recovery", `${gated}/v1/workspaces/bench/queue`, token, clients, until, startedAt)),
      Effect.ensuring(driver, Effect.sync(() => stop()))
    ], { concurrency: "unbounded" })
    const afterRelease = run.samples.filter((sample) => sample.at >= (release.done ?? 0))
    const first2xx = afterRelease.find((sample) => sample.status >= 200 && sample.status < 300)
    const lastNon2xx = afterRelease.filter((sample) => sample.status < 200 || sample.status >= 300).at(-1)
    return {
      releasedAt: release.at ?? Number.NaN,
      releaseMillis: (release.done ?? Number.NaN) - (release.at ?? Number.NaN),
      first2xxMillis: first2xx === undefined ? Number.NaN : first2xx.at - (release.done ?? 0),
      last503Millis: lastNon2xx === undefined ? 0 : lastNon2xx.at - (release.done ?? 0),
      after: statuses(afterRelease),
      metrics: yield* admissionMetrics(gated)
    }
  })

  const windowMax = (1 + defaults.openJitterRatio) * defaults.openMillis
  console.log("\nsummary (GET /v1/workspaces/{workspace}/queue = token check + one query on one checkout)")
  console.log("\nhealthy database, same clients:")
  console.log(
    "| API | requests | req/s (mean of the two) | statuses | p50 ms (worse of the two) | p99 ms (worse) | DB connection attempts |"
  )
  console.log("|---|---|---|---|---|---|---|")
  for (const r of healthy) {
    console.log(
      `| ${r.name} | ${r.requests} | ${Stats.fixed(r.perSecond, 0)} | ${JSON.stringify(r.statuses)} | ${
        Stats.fixed(r.p50)
      } | ${Stats.fixed(r.p99)} | ${r.attempts} |`
    )
  }
  console.log(`throughput with the gate / without: ${Stats.fixed(healthy[0]!.perSecond / healthy[1]!.perSecond, 3)}`)
  console.log(`gate metrics after the healthy run: ${healthy[0]!.metrics.join("; ")}`)

  console.log(`\nsaturated database, ${saturatedSeconds} s:`)
  console.log(
    "| API | requests | statuses | 503 p50 ms | 503 p99 ms | /healthz p50 ms | /healthz p99 ms | 503 p99 / healthz p99 | attempts | attempts/s (mean, max; first second) |"
  )
  console.log("|---|---|---|---|---|---|---|---|---|---|")
  for (const r of saturated) {
    const rest = r.series.slice(1)
    console.log(
      `| ${r.name} | ${r.requests} | ${JSON.stringify(r.statuses)} | ${Stats.fixed(r.p50_503)} | ${
        Stats.fixed(r.p99_503)
      } | ${Stats.fixed(r.p50_healthz)} | ${Stats.fixed(r.p99_healthz)} | ${
        Stats.fixed(r.p99_503 / r.p99_healthz, 2)
      } | ${r.attempts} | ${Stats.fixed(r.attempts / r.seconds)}, ${Math.max(0, ...rest)}; ${r.series[0] ?? "-"} |`
    )
  }
  console.log(
    `bound the gate's settings imply, per instance, while the database stays unavailable: one probe per open window, the windows ${
      Breaker.nominalWindows(Admission.policy(defaults).breaker, 7).join(", ")
    } ms (each ×[${1 - defaults.openJitterRatio}, ${
      1 + defaults.openJitterRatio
    }]), plus once per trip the requests already admitted (at most the limit, ${defaults.maxConcurrency}; here at most the ${clients} clients)`
  )
  console.log(`gate metrics after the saturated run: ${saturated[0]!.metrics.join("; ")}`)

  console.log("\nrecovery (gate on):")
  console.log(
    `release took ${Stats.fixed(recovery.releaseMillis, 0)} ms (until the held backends exited); first 2xx ${
      Stats.fixed(recovery.first2xxMillis, 0)
    } ms after it, last non-2xx ${Stats.fixed(recovery.last503Millis, 0)} ms after it; statuses after: ${
      JSON.stringify(recovery.after)
    }; target: within the window the 5 s outage reached (1 → 2 → 4 s nominal: ${4 * windowMax} ms at the longest draw)`
  )
  console.log(`gate metrics at the end: ${recovery.metrics.join("; ")}`)
})

const outageClients = Number(process.env.BENCH_OUTAGE_CLIENTS ?? 20)
const outageSeconds = Number(process.env.BENCH_OUTAGE_SECONDS ?? 120)
/** The outage run's request bound: 20 clients that ignore `Retry-After` get ~3,000 fast 503s a second here. */
const outageMaxRequests = Number(process.env.BENCH_OUTAGE_MAX_REQUESTS ?? 3_000_000)
const afterSeconds = Number(process.env.BENCH_AFTER_SECONDS ?? 60)

/**
 * One instance through its own counting proxy: healthy 3 s, saturated `outageSeconds`, released, `afterSeconds`
 * more; the attempts per second at the proxy and every response.
 */
const outageRun = (name: string, cluster: Cluster.Cluster, env: Record<string, string>, adminWorkspace: string) =>
  Effect.scoped(Effect.gen(function*() {
    const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
    const { baseUrl, client } = yield* startApi(proxy.url(cluster.url), env)
    const { token } = yield* Effect.orDie(client.createWorkspace({ adminToken, name: adminWorkspace }))
    const url = `${baseUrl}/v1/workspaces/${adminWorkspace}/queue`
    console.log(`${name}: ${outageClients} clients, healthy 3 s, saturated ${outageSeconds} s, then ${afterSeconds} s`)
    const startedAt = performance.now()
    const marks: { saturated?: number; releasing?: number; released?: number } = {}
    /** Attempts counted at the proxy when the saturation began, 60 s before its end, and at its end. */
    const counted: { saturated?: number; lastMinute?: number; releasing?: number } = {}
    let stop: () => void = () => undefined
    const until = new Promise<void>((resolve) => (stop = resolve))
    let running = true
    const driver = Effect.scoped(Effect.gen(function*() {
      yield* Effect.promise(() => sleep(3000))
      // The API's own connections of the moment come and go: take the slots they free too, so every slot is held.
      const saturation = yield* Saturation.hold(cluster.url, { patience: "2 seconds" }).pipe(Effect.orDie)
      marks.saturated = performance.now() - startedAt
      counted.saturated = yield* proxy.attempts
      console.log(`  [${name}] holding ${saturation.held} connections`)
      yield* Effect.promise(() => sleep(Math.max(0, outageSeconds - 60) * 1000))
      counted.lastMinute = yield* proxy.attempts
      yield* Effect.promise(() => sleep(Math.min(60, outageSeconds) * 1000))
      counted.releasing = yield* proxy.attempts
      marks.releasing = performance.now() - startedAt
      yield* Effect.orDie(saturation.release)
      marks.released = performance.now() - startedAt
      console.log(
        `  [${name}] released (${Stats.fixed(marks.released - marks.releasing, 0)} ms until the backends exited)`
      )
      yield* Effect.promise(() => sleep(afterSeconds * 1000))
    })).pipe(Effect.ensuring(Effect.sync(() => {
      running = false
      stop()
    })))
    const [run, , series] = yield* Effect.all([
      Effect.promise(() => load(name, url, token, outageClients, until, startedAt, outageMaxRequests)),
      driver,
      attemptsPerSecond(proxy, () => running)
    ], { concurrency: "unbounded" })
    // The per-second series is for the eye (its seconds drift on a loaded machine); the totals are read at the
    // saturation's own instants.
    const releasingAt = Math.min(series.length, Math.floor(marks.releasing! / 1000))
    const lastMinute = run.samples.filter((s) => s.at >= marks.releasing! - 60_000 && s.at < marks.releasing!)
    const afterRelease = run.samples.filter((s) => s.at >= marks.released!)
    const first2xx = afterRelease.find((s) => s.status >= 200 && s.status < 300)
    const retryAfters = lastMinute.flatMap((s) => s.retryAfter === undefined ? [] : [s.retryAfter])
    return {
      name,
      attemptsDuringOutage: counted.releasing! - counted.saturated!,
      attemptsLastMinute: counted.releasing! - counted.lastMinute!,
      perSecondLastMinute: series.slice(releasingAt - 60, releasingAt),
      first2xxAfterReleaseMillis: first2xx === undefined ? Number.NaN : first2xx.at - marks.released!,
      first2xxAfterReleaseStartMillis: first2xx === undefined ? Number.NaN : first2xx.at - marks.releasing!,
      afterReleaseByTen: Array.from(
        { length: Math.ceil(afterSeconds / 10) },
        (_, i) =>
          statuses(
            afterRelease.filter((s) =>
              s.at - marks.released! >= i * 10_000 && s.at - marks.released! < (i + 1) * 10_000
            )
          )
      ),
      responsesLastMinute: statuses(lastMinute),
      retryAfterLastMinute: retryAfters.length === 0
        ? "-"
        : `${retryAfters.reduce((a, b) => Math.min(a, b))}–${retryAfters.reduce((a, b) => Math.max(a, b))} s (median ${
          Stats.median(retryAfters)
        })`,
      after: statuses(afterRelease),
      metrics: yield* admissionMetrics(baseUrl)
    }
  }))

const outageProgram = Effect.gen(function*() {
  console.log(
    `outage bench: one API instance, ${outageClients} clients on GET …/queue (not honouring Retry-After), database saturated ${outageSeconds} s`
  )
  const cluster = yield* Cluster.start({ maxConnections: 40 })
  const capped = { API_ADMISSION_OPEN_MAX_MILLIS: String(defaults.openMillis) }
  const runs = [
    yield* outageRun(
      `defaults (open window ${defaults.openMillis} ms → ×2 → cap ${defaults.openMaxMillis} ms)`,
      cluster,
      {},
      "bench"
    ),
    yield* outageRun(
      `constant window (API_ADMISSION_OPEN_MAX_MILLIS=${defaults.openMillis}, as before)`,
      cluster,
      capped,
      "bench2"
    )
  ]
  const bound = (1 + defaults.openJitterRatio) * defaults.openMaxMillis
  console.log(`\nsummary: ${outageClients} clients, saturated ${outageSeconds} s, one instance`)
  console.log(
    "| gate | attempts during the outage | attempts in its last 60 s | per second (last 60 s) | responses in the last 60 s | Retry-After in the last 60 s | first 2xx after the release (after the backends exited) |"
  )
  console.log("|---|---|---|---|---|---|---|")
  for (const r of runs) {
    console.log(
      `| ${r.name} | ${r.attemptsDuringOutage} | ${r.attemptsLastMinute} | ${r.perSecondLastMinute.join(" ")} | ${
        JSON.stringify(r.responsesLastMinute)
      } | ${r.retryAfterLastMinute} | ${Stats.fixed(r.first2xxAfterReleaseStartMillis / 1000)} s (${
        Stats.fixed(r.first2xxAfterReleaseMillis / 1000)
      } s) |`
    )
  }
  console.log(
    `targets: ≤ 4 attempts in the last 60 s; first 2xx within 1.5 × the cap = ${
      Stats.fixed(bound / 1000)
    } s of the release`
  )
  for (const r of runs) {
    console.log(
      `${r.name}: responses after the release, per 10 s: ${r.afterReleaseByTen.map((c) => JSON.stringify(c)).join(" ")}`
    )
    console.log(`${r.name}: gate metrics at the end: ${r.metrics.join("; ")}`)
  }
})

const mode = process.argv[2] ?? process.env.BENCH_MODE ?? "all"
const main: Effect.Effect<void, unknown, Scope.Scope | HttpClient.HttpClient> = mode === "outage"
  ? outageProgram
  : program

main.pipe(
  Effect.scoped,
  Effect.provide(FetchHttpClient.layer),
  Effect.provide(Logger.layer([Logger.consoleJson])),
  Effect.provideService(References.MinimumLogLevel, "Warn"),
  NodeRuntime.runMain
)
