/**
 * 1,000 simulated clients refused at the same instant with `Retry-After: 1`: their retries must not come back
 * in step. Runs the real transport over a stand-in `HttpClient` (the refusal, then success) under the
 * TestClock, with a seeded Random.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Random } from "effect"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"
import { RetryBudget, RetryPolicy } from "../src/index.ts"
import * as Transport from "../src/internal/Transport.ts"

const CLIENTS = 1_000
const BUCKETS = 10

/** A server that answers the first request of each client 503 with `Retry-After: 1`, then 201. */
const server = (retryTimes: Array<number>) => {
  const seen = new Set<string>()
  return HttpClient.make((request) =>
    Effect.gen(function*() {
      const client = request.headers["x-client"] ?? ""
      const first = !seen.has(client)
      seen.add(client)
      if (!first) retryTimes.push(yield* Clock.currentTimeMillis)
      return HttpClientResponse.fromWeb(
        request,
        first
          ? new Response("{\"detail\":\"database temporarily unavailable\"}", {
            status: 503,
            headers: { "retry-after": "1" }
          })
          : new Response("{}", { status: 201 })
      )
    })
  )
}

const retryTimes = (options: RetryPolicy.Options) =>
  Effect.gen(function*() {
    const times: Array<number> = []
    const start = yield* Clock.currentTimeMillis
    const settings = yield* RetryPolicy.settings(options)
    const budget = yield* RetryBudget.make({ maxTokens: CLIENTS })
    const client = Transport.make(server(times), settings, budget)
    const fibers = yield* Effect.forEach(Array.from({ length: CLIENTS }, (_, i) => i), (i) =>
      Effect.forkChild(client.execute(
        HttpClientRequest.post("http://api.test/v1/workspaces/w/sessions/s/messages").pipe(
          HttpClientRequest.setHeader("x-client", String(i))
        )
      )))
    yield* TestClock.adjust("5 seconds")
    const responses = yield* Fiber.joinAll(fibers)
    assert.isTrue(responses.every((response) =>
      response.status === 201
    ))
    return times.map((t) => t - start)
  })

/** Counts per bucket of `width` ms from `from`, and Pearson's chi-square against uniform. */
const spread = (times: ReadonlyArray<number>, from: number, width: number) => {
  const counts = Array.from({ length: BUCKETS }, () => 0)
  for (const t of times) {
    const index = Math.min(BUCKETS - 1, Math.floor((t - from) / width))
    counts[index] = (counts[index] ?? 0) + 1
  }
  const expected = times.length / BUCKETS
  const chiSquare = counts.reduce((sum, observed) => sum + (observed - expected) ** 2 / expected, 0)
  return { counts, chiSquare, maxBucket: Math.max(...counts), bound: expected + 5 * Math.sqrt(expected) }
}

/** Upper 0.1 % point of chi-square with 9 degrees of freedom. */
const critical9 = 27.877

describe("retry times of 1,000 clients refused together", () => {
  it.effect("none before Retry-After; spread uniformly over the full-jitter window after it", () =>
    Effect.gen(function*() {
      const times = yield* retryTimes({ baseDelay: "1 second" }).pipe(Random.withSeed("spread"))
      assert.strictEqual(times.length, CLIENTS)
      for (const t of times) assert.isTrue(t >= 1_000 && t < 2_000, `retry at ${t} ms`)
      const s = spread(times, 1_000, 100)
      console.log(`client retries: per 100 ms ${s.counts.join(" ")}, chi-square ${s.chiSquare.toFixed(2)}`)
      assert.isAtMost(s.maxBucket, s.bound)
      assert.isBelow(s.chiSquare, critical9)
    }))

  it.effect("other seeds too", () =>
    Effect.gen(function*() {
      for (const seed of ["a", "b", 7]) {
        const s = spread(yield* retryTimes({ baseDelay: "1 second" }).pipe(Random.withSeed(seed)), 1_000, 100)
        assert.isBelow(s.chiSquare, critical9, `seed ${seed}: ${s.counts.join(" ")}`)
      }
    }))

  it.effect("control: with a negligible jitter window every retry lands on Retry-After itself and the check fails", () =>
    Effect.gen(function*() {
      const times = yield* retryTimes({ baseDelay: "1 millis" }).pipe(Random.withSeed("spread"))
      const s = spread(times, 1_000, 100)
      assert.strictEqual(s.counts[0], CLIENTS)
      assert.isAbove(s.chiSquare, critical9)
    }))
})
