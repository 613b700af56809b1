import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { ApiClient, RetryBudget, RetryPolicy } from "../src/index.ts"

const invalid = (options: ApiClient.Options) =>
  Effect.flip(ApiClient.make(options)).pipe(Effect.provide(FetchHttpClient.layer))

describe("options", () => {
  it.effect("invalid options fail naming the option and what is allowed", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[ApiClient.Options, string]> = [
        [{ baseUrl: "ftp://x" }, "baseUrl = \"ftp://x\" is not allowed: expected an http:// or https:// URL"],
        [{ baseUrl: "http://x", maxAttempts: 0 }, "maxAttempts = 0 is not allowed: expected an integer in [1, 100]"],
        [{ baseUrl: "http://x", baseDelay: -1 }, "baseDelay"],
        [{ baseUrl: "http://x", baseDelay: "2 seconds", maxDelay: "1 second" }, "maxDelay"],
        [{ baseUrl: "http://x", budget: { ratio: 0 } }, "budget.ratio = 0 is not allowed: expected a number in (0, 1]"],
        [{ baseUrl: "http://x", budget: { maxTokens: 1.5 } }, "budget.maxTokens = 1.5 is not allowed"]
      ]
      for (const [options, message] of cases) {
        const error = yield* invalid(options)
        assert.strictEqual(error._tag, "InvalidParameter")
        assert.include(error.message, message)
      }
    }))

  it("the delay never undercuts Retry-After and never exceeds the cap", () => {
    const settings: RetryPolicy.Settings = { maxAttempts: 5, jitter: { baseMillis: 250, capMillis: 30_000 } }
    for (const u of [0, 0.5, 0.999]) {
      for (let retry = 0; retry < 10; retry++) {
        const delay = RetryPolicy.delayFrom(retry, 2_000, settings, u)
        assert.isAtLeast(delay, 2_000)
        assert.isAtMost(delay, 30_000)
      }
    }
    assert.strictEqual(RetryPolicy.delayFrom(0, 2_000, settings, 0.5), 2_125)
    assert.isTrue(RetryPolicy.beyondCap(31_000, settings))
    assert.strictEqual(RetryPolicy.retryAfterMillis("3", 0), 3_000)
    assert.strictEqual(RetryPolicy.retryAfterMillis("Thu, 01 Jan 1970 00:00:05 GMT", 1_000), 4_000)
    assert.isUndefined(RetryPolicy.retryAfterMillis("soon", 0))
  })

  it.effect("the budget: retries ≤ maxTokens + ratio × requests", () =>
    Effect.gen(function*() {
      const budget = yield* RetryBudget.make({ maxTokens: 2, ratio: 0.1 })
      let retries = 0
      for (let request = 0; request < 100; request++) {
        yield* budget.deposit
        if (yield* budget.withdraw) retries++
      }
      assert.isAtMost(retries, 2 + 0.1 * 100)
      assert.isAtLeast(retries, 10)
    }))
})
