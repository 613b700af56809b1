/**
 * Benchmark (not a test): N clients against a saturated API for 10 s, then released.
 *
 * The real API entry point (production defaults: `Retry-After: 1`) runs against a real PostgreSQL whose every
 * connection slot is held; N clients each write one message. A recording proxy in front of the API counts the
 * requests that reach it per second. Two kinds of client, one phase each:
 *
 *  - `api-client`: `@resilience/api-client` with its production defaults (5 attempts, Retry-After as floor +
 *    full jitter from 250 ms, cap 30 s, budget 10 tokens + 10 % of requests). When a call gives up
 *    (`ApiUnavailable`), the application resends the same write (same Idempotency-Key) after the same policy's
 *    wait: Retry-After + full jitter, growing with each resend.
 *  - `naive`: a loop that resends after exactly Retry-After on every 503, no jitter, no budget (what the
 *    launcher did before).
 *
 * Reported: requests reaching the server per second while saturated (mean and peak), and the time from the
 * release until every client's write was accepted. Loopback only; bounded: N ≤ 2000, each phase ≤ 10 s
 * saturated + ≤ 120 s after.
 *
 *   npm run bench -w @resilience/api-client
 *   BENCH_CLIENTS=500 BENCH_SATURATION_SECONDS=10 npm run bench -w @resilience/api-client
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Duration, Effect, Fiber, Random } from "effect"
import { FetchHttpClient } from "effect/http"
import { randomUUID } from "node:crypto"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import { ApiClient, RetryPolicy } from "../src/index.ts"
import { adminToken, type Arrival, recordingProxy, spawnApi } from "../test/support.ts"

/** A readiness wait is one long poll, not a fleet's retries: it gets a budget that does not run out. */
const waiting = { maxTokens: 1_000_000, ratio: 1 }

const clients = Math.min(2000, Number(process.env.BENCH_CLIENTS ?? 200))
const saturationSeconds = Math.min(10, Number(process.env.BENCH_SATURATION_SECONDS ?? 10))

type Mode = "api-client" | "naive"

/** One client's write, until accepted; resolves with the time it was accepted. */
const write = (mode: Mode, api: ApiClient.ApiClient, token: string, baseUrl: string, i: number) =>
  Effect.gen(function*() {
    const messages = [{ peer: `p${i}`, content: `client ${i} was here` }]
    if (mode === "naive") {
      while (true) {
        // a connection reset counts as a 503 without Retry-After
        const response = yield* Effect.promise(() =>
          fetch(`${baseUrl}/v1/workspaces/bench/sessions/s${i}/messages`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ messages })
          }).then(
            async (r) => ({ status: r.status, retryAfter: r.headers.get("retry-after"), body: await r.text() }),
            () => ({ status: 503, retryAfter: null, body: "" })
          )
        )
        if (response.status === 201) return performance.now()
        yield* Effect.sleep(Duration.seconds(Number(response.retryAfter ?? 1)))
      }
    }
    const key = randomUUID()
    const settings = yield* Effect.orDie(RetryPolicy.settings())
    for (let resend = 0;; resend++) {
      const accepted = yield* api.appendMessages({
        token,
        workspace: "bench",
        session: `s${i}`,
        messages,
        idempotencyKey: key
      })
        .pipe(
          Effect.as(true),
          Effect.catchTag("ApiUnavailable", (error) =>
            Effect.flatMap(Random.next, (u) =>
              Effect.as(
                Effect.sleep(Duration.millis(
                  RetryPolicy.delayFrom(Math.min(resend, 20), error.retryAfterMillis ?? 1000, settings, u)
                )),
                false
              ))),
          Effect.orDie
        )
      if (accepted) return performance.now()
    }
  })

const perSecond = (arrivals: ReadonlyArray<Arrival>, from: number, seconds: number) => {
  const counts = Array.from({ length: seconds }, () => 0)
  for (const arrival of arrivals) {
    const second = Math.floor((arrival.atMillis - from) / 1000)
    if (second >= 0 && second < seconds) counts[second] = (counts[second] ?? 0) + 1
  }
  return counts
}

const phase = (mode: Mode, cluster: Cluster.Cluster, proxy: { url: string; arrivals: Array<Arrival> }, token: string) =>
  Effect.scoped(Effect.gen(function*() {
    const saturation = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
    const before = proxy.arrivals.length
    const startedAt = performance.now()
    // one client (own budget, own connection pool share) per simulated process
    const apis = yield* Effect.forEach(
      Array.from({ length: clients }),
      () => ApiClient.make({ baseUrl: proxy.url }).pipe(Effect.orDie)
    )
    const writers = yield* Effect.forEach(
      apis,
      (api, i) => Effect.forkChild(write(mode, api, token, proxy.url, i))
    )
    yield* Effect.sleep(Duration.seconds(saturationSeconds))
    yield* Effect.orDie(saturation.release)
    const releasedAt = performance.now()
    const accepted = yield* Fiber.joinAll(writers).pipe(Effect.timeout("120 seconds"), Effect.orDie)
    const lastAccepted = Math.max(...accepted)
    const arrivals = proxy.arrivals.slice(before).filter((arrival) => arrival.path.includes("/messages"))
    const during = perSecond(arrivals, startedAt, saturationSeconds)
    const after = perSecond(arrivals, releasedAt, Math.max(1, Math.ceil((lastAccepted - releasedAt) / 1000)))
    const tenths = Array.from({ length: saturationSeconds * 10 }, () => 0)
    for (const arrival of arrivals) {
      const tenth = Math.floor((arrival.atMillis - startedAt) / 100)
      if (tenth >= 10 && tenth < tenths.length) tenths[tenth] = (tenths[tenth] ?? 0) + 1
    }
    return {
      mode,
      duringPerSecond: during,
      meanPerSecond: Stats.mean(during),
      peakPerSecond: Math.max(...during),
      // after the first second (everyone's first request), the largest 100 ms burst: in step or spread
      peakPer100ms: Math.max(...tenths),
      afterPerSecond: after,
      allAcceptedSeconds: (lastAccepted - releasedAt) / 1000,
      total: arrivals.length,
      refusedAfterRelease: arrivals.filter((arrival) => arrival.atMillis >= releasedAt && arrival.status === 503).length
    }
  }))

const program = Effect.gen(function*() {
  console.log(`bench: ${clients} clients, ${saturationSeconds} s saturated, then released; loopback only`)
  const cluster = yield* Cluster.start({ maxConnections: 30 })
  const api = yield* spawnApi({ url: cluster.url, schema: "bench" })
  const proxy = yield* recordingProxy(api)
  const setup = yield* ApiClient.make({ baseUrl: proxy.url, maxAttempts: 100, maxDelay: "2 seconds", budget: waiting })
    .pipe(
      Effect.orDie
    )
  yield* Effect.orDie(setup.readyz)
  const { token } = yield* Effect.orDie(setup.createWorkspace({ adminToken, name: "bench" }))
  const results = []
  for (const mode of ["api-client", "naive"] as const) {
    console.log(`phase ${mode} …`)
    const result = yield* phase(mode, cluster, proxy, token)
    console.log(
      `  ${mode}: during saturation ${
        result.meanPerSecond.toFixed(1)
      } req/s at the server (peak ${result.peakPerSecond}/s,`
        + ` ${result.peakPer100ms} in the busiest 100 ms after the first second),`
        + ` per second ${result.duringPerSecond.join(" ")}; after release ${
          result.afterPerSecond.join(" ")
        }; every write accepted ${
          result.allAcceptedSeconds.toFixed(2)
        } s after release (${result.refusedAfterRelease} refusals after it); ${result.total} requests in all`
    )
    results.push(result)
    yield* Effect.sleep("2 seconds")
  }
  console.log(
    "\nsummary (production defaults: Retry-After 1 s; client 5 attempts, 250 ms base, 30 s cap, budget 10 + 10 %)"
  )
  console.log(
    "| client | N | req/s at server while saturated (mean / peak s / peak 100 ms) | all writes accepted after release | requests |"
  )
  console.log("| --- | --- | --- | --- | --- |")
  for (const r of results) {
    console.log(
      `| ${r.mode} | ${clients} | ${r.meanPerSecond.toFixed(1)} / ${r.peakPerSecond} / ${r.peakPer100ms} | ${
        r.allAcceptedSeconds.toFixed(2)
      } s | ${r.total} |`
    )
  }
}).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))

NodeRuntime.runMain(
  program.pipe(Effect.tapCause((cause) => Effect.sync(() => console.error("bench failed:", String(cause)))))
)
