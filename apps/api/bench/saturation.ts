/**
 * Benchmark (not a test): 200 concurrent HTTP clients against the API
 *  1. with the database saturated (every connection slot held by someone else): latency of the 503s and the
 *     number of connection attempts the API made (a counting TCP proxy sits in front of PostgreSQL);
 *  2. with the database healthy: requests per second (fresh connection per checkout, `DB_POOL_CLASS=null`,
 *     and an in-process pool, `queue`).
 * Loopback only; every phase is bounded in time and in request count. Prints progress and a summary.
 *
 *   npm run bench -w @resilience/api-app
 *   BENCH_CLIENTS=200 BENCH_SECONDS=5 BENCH_MAX_REQUESTS=50000 npm run bench -w @resilience/api-app
 */
import { NodeRuntime } from "@effect/platform-node"
import { ApiClient } from "@resilience/api-client"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy, EntryPoint } from "@resilience/test-db"
import { Effect, Logger, References } from "effect"
import { FetchHttpClient } from "effect/http"

/** A readiness wait is one long poll, not a fleet's retries: it gets a budget that does not run out. */
const waiting = { maxTokens: 1_000_000, ratio: 1 }

const clients = Number(process.env.BENCH_CLIENTS ?? 200)
const seconds = Number(process.env.BENCH_SECONDS ?? 5)
const maxRequests = Number(process.env.BENCH_MAX_REQUESTS ?? 50_000)
const maxConnections = 260
const adminToken = "bench-admin-token-0123456789"

interface PhaseResult {
  readonly name: string
  readonly requests: number
  readonly seconds: number
  readonly statuses: Record<string, number>
  readonly p50: number
  readonly p99: number
  readonly max: number
  readonly attempts?: number | undefined
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

/** `clients` loops, each sending one request after the other, until the time or the request budget is spent. */
const load = async (
  name: string,
  url: string,
  token: string,
  concurrency = clients
): Promise<Omit<PhaseResult, "attempts">> => {
  const latencies: Array<number> = []
  const statuses: Record<string, number> = {}
  let sent = 0
  const startedAt = performance.now()
  const deadline = startedAt + seconds * 1000
  const progress = setInterval(() => {
    const elapsed = (performance.now() - startedAt) / 1000
    console.log(`  [${name}] ${elapsed.toFixed(1)} s: ${latencies.length} responses ${JSON.stringify(statuses)}`)
  }, 1000)
  const client = async () => {
    while (performance.now() < deadline && sent < maxRequests) {
      sent += 1
      const t0 = performance.now()
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } })
      await response.arrayBuffer()
      latencies.push(performance.now() - t0)
      statuses[response.status] = (statuses[response.status] ?? 0) + 1
    }
  }
  await Promise.all(Array.from({ length: concurrency }, client))
  clearInterval(progress)
  const elapsed = (performance.now() - startedAt) / 1000
  latencies.sort((a, b) => a - b)
  return {
    name,
    requests: latencies.length,
    seconds: elapsed,
    statuses,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1] ?? Number.NaN
  }
}

/** Spawns the real entry point (its own process, so the load generator does not share its event loop). */
const startApi = (url: string, poolClass: "null" | "queue") =>
  Effect.gen(function*() {
    const baseUrl = yield* EntryPoint.api({ url, schema: "bench", adminToken, env: { DB_POOL_CLASS: poolClass } })
    // ready, not only alive: the schema is migrated in the background after the server listens
    const client = yield* ApiClient.make({ baseUrl, maxAttempts: 100, maxDelay: "1 second", budget: waiting }).pipe(
      Effect.orDie
    )
    yield* Effect.orDie(client.readyz)
    return { baseUrl, client }
  })

const program = Effect.gen(function*() {
  console.log(`bench: ${clients} clients, ≤ ${seconds} s and ≤ ${maxRequests} requests per phase, loopback only`)
  const cluster = yield* Cluster.start({ maxConnections })
  const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
  const { baseUrl: api, client } = yield* startApi(proxy.url(cluster.url), "null")
  const created = yield* Effect.orDie(client.createWorkspace({ adminToken, name: "bench" }))
  const queueUrl = `${api}/v1/workspaces/bench/queue`
  const results: Array<PhaseResult> = []

  // Warm up the HTTP path (and the JIT) on a healthy database.
  yield* Effect.promise(() => load("warm-up", queueUrl, created.token))

  console.log("phase 0: GET /healthz (no database): the HTTP path alone")
  results.push(yield* Effect.promise(() => load("healthz", `${api}/healthz`, created.token)))

  console.log("phase 1: saturated database")
  yield* Effect.scoped(Effect.gen(function*() {
    const { held } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
    console.log(`  holding ${held} of max_connections=${maxConnections}`)
    const before = yield* proxy.attempts
    const result = yield* Effect.promise(() => load("saturated", queueUrl, created.token))
    const attempts = (yield* proxy.attempts) - before
    results.push({ ...result, attempts })
    console.log("phase 1b: saturated database, one client (latency of a 503 without queueing)")
    const beforeOne = yield* proxy.attempts
    const one = yield* Effect.promise(() => load("saturated-1-client", queueUrl, created.token, 1))
    results.push({ ...one, attempts: (yield* proxy.attempts) - beforeOne })
  }))

  console.log("phase 2: healthy database, fresh connection per checkout (DB_POOL_CLASS=null)")
  const beforeHealthy = yield* proxy.attempts
  const healthy = yield* Effect.promise(() => load("healthy-null", queueUrl, created.token))
  results.push({ ...healthy, attempts: (yield* proxy.attempts) - beforeHealthy })

  console.log("phase 3: healthy database, in-process pool of 10 (DB_POOL_CLASS=queue)")
  const { baseUrl: pooled } = yield* startApi(proxy.url(cluster.url), "queue")
  const beforePooled = yield* proxy.attempts
  const pooledResult = yield* Effect.promise(() =>
    load("healthy-queue", `${pooled}/v1/workspaces/bench/queue`, created.token)
  )
  results.push({ ...pooledResult, attempts: (yield* proxy.attempts) - beforePooled })

  console.log("\nsummary (phases 1-3: GET /v1/workspaces/{workspace}/queue = token check + one query on one checkout)")
  console.log("| phase | requests | req/s | statuses | p50 ms | p99 ms | max ms | DB connection attempts |")
  console.log("|---|---|---|---|---|---|---|---|")
  for (const r of results) {
    console.log(
      `| ${r.name} | ${r.requests} | ${(r.requests / r.seconds).toFixed(0)} | ${JSON.stringify(r.statuses)} | ${
        r.p50.toFixed(1)
      } | ${r.p99.toFixed(1)} | ${r.max.toFixed(1)} | ${r.attempts ?? ""} |`
    )
  }
})

program.pipe(
  Effect.scoped,
  Effect.provide(FetchHttpClient.layer),
  Effect.provide(Logger.layer([Logger.consoleJson])),
  Effect.provideService(References.MinimumLogLevel, "Warn"),
  NodeRuntime.runMain
)
