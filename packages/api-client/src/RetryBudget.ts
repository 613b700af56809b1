/**
 * A retry budget: a token bucket shared by every call of a client (or of several clients), in the style of
 * Finagle's `RetryBudget`, gRPC's retry throttling and the AWS SDKs' retry quota. Every request deposits
 * `ratio` of a token (up to `maxTokens`); every retry withdraws a whole token, and no retry happens without
 * one. So over any stretch of time, retries ≤ `maxTokens` + `ratio` × requests: during a long outage a client
 * adds at most `ratio` (10 % by default) to the load it would make without retries, and a fleet of clients
 * cannot multiply the load of an outage.
 *
 * @since 0.1.0
 */
import { InvalidParameter } from "@resilience/parameters"
import { Effect, Metric, Ref } from "effect"

/**
 * Options of a budget.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Tokens the bucket holds (and starts with): the burst of retries allowed before any request (default 10). */
  readonly maxTokens?: number | undefined
  /** Tokens deposited per request, in (0, 1]: the fraction of requests that may be retried (default 0.1). */
  readonly ratio?: number | undefined
}

/**
 * The defaults: 10 tokens, 10 % of requests.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = { maxTokens: 10, ratio: 0.1 } as const

/**
 * A budget.
 *
 * @since 0.1.0
 * @category models
 */
export interface RetryBudget {
  readonly maxTokens: number
  readonly ratio: number
  /** A request was made: deposit `ratio` of a token. */
  readonly deposit: Effect.Effect<void>
  /** Takes one token for a retry; `false` when there is none (do not retry). */
  readonly withdraw: Effect.Effect<boolean>
  /** Tokens in the bucket now. */
  readonly balance: Effect.Effect<number>
}

/**
 * `api_client_retry_budget_tokens`: tokens left in the budget after its last change.
 *
 * @deprecated since 0.3.0: internal (the gauge reaches a dashboard through the application's exporter); no longer
 * exported from the next minor release.
 * @since 0.1.0
 * @category metrics
 */
export const balanceGauge = Metric.gauge("api_client_retry_budget_tokens", {
  description: "Tokens left in the API client's retry budget"
})

/**
 * Validates the options: `maxTokens` an integer in [0, 1000000], `ratio` a number in (0, 1].
 *
 * @deprecated since 0.3.0: internal, the validation {@link make} runs; no longer exported from the next minor
 * release.
 * @since 0.1.0
 * @category constructors
 */
export const settings = (
  options: Options = {}
): Effect.Effect<{ readonly maxTokens: number; readonly ratio: number }, InvalidParameter.InvalidParameter> => {
  const maxTokens = options.maxTokens ?? defaults.maxTokens
  const ratio = options.ratio ?? defaults.ratio
  if (!Number.isInteger(maxTokens) || maxTokens < 0 || maxTokens > 1_000_000) {
    return Effect.fail(
      new InvalidParameter.InvalidParameter({
        parameter: "budget.maxTokens",
        value: maxTokens,
        allowed: "an integer in [0, 1000000]"
      })
    )
  }
  if (!(Number.isFinite(ratio) && ratio > 0 && ratio <= 1)) {
    return Effect.fail(
      new InvalidParameter.InvalidParameter({ parameter: "budget.ratio", value: ratio, allowed: "a number in (0, 1]" })
    )
  }
  return Effect.succeed({ maxTokens, ratio })
}

/**
 * A full budget.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<RetryBudget, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const { maxTokens, ratio } = yield* settings(options)
    const tokens = yield* Ref.make(maxTokens)
    const report = (balance: number) => Metric.update(balanceGauge, balance)
    return {
      maxTokens,
      ratio,
      deposit: Effect.flatMap(
        Ref.updateAndGet(tokens, (balance) => Math.min(maxTokens, balance + ratio)),
        report
      ),
      withdraw: Effect.flatMap(
        Ref.modify(tokens, (balance) => balance >= 1 ? [true, balance - 1] : [false, balance]),
        (granted) =>
          granted
            ? Effect.flatMap(Ref.get(tokens), (balance) => Effect.as(report(balance), true))
            : Effect.succeed(false)
      ),
      balance: Ref.get(tokens)
    } satisfies RetryBudget
  })
