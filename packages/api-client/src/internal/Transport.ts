/**
 * The retrying transport under the typed client: an `HttpClient` that gives every write (POST, PATCH) an
 * `Idempotency-Key` once per logical request, and retries a 503 (and, for a request that is safe to repeat, a
 * connection failure) after `Retry-After` plus full jitter, within the attempts, the cap and the retry budget.
 * Each retry re-sends the same request, key included. When it stops, it fails with `ApiUnavailable` naming
 * why.
 *
 * @since 0.1.0
 */
import { Clock, Duration, Effect, Metric, Random } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import type { HttpClientError } from "effect/http"
import { randomUUID } from "node:crypto"
import { ApiUnavailable, type GaveUp } from "../ClientErrors.ts"
import type * as RetryBudget from "../RetryBudget.ts"
import * as RetryPolicy from "../RetryPolicy.ts"
import * as ClientMetrics from "./ClientMetrics.ts"
import { CurrentCall } from "./CurrentCall.ts"

/**
 * The header of the idempotency key.
 *
 * @since 0.1.0
 * @category constants
 */
export const idempotencyKeyHeader = "idempotency-key"

const writes: ReadonlySet<string> = new Set(["POST", "PATCH"])

/** Adds the call's (or a new random) idempotency key to a write that has none: once per logical request. */
const withIdempotencyKey = (request: HttpClientRequest.HttpClientRequest) =>
  !writes.has(request.method) || request.headers[idempotencyKeyHeader] !== undefined
    ? Effect.succeed(request)
    : Effect.map(
      Effect.service(CurrentCall),
      (call) => HttpClientRequest.setHeader(request, idempotencyKeyHeader, call.idempotencyKey ?? randomUUID())
    )

interface Refusal {
  readonly status: number | undefined
  readonly floorMillis: number
  readonly detail: string
}

/**
 * Wraps an `HttpClient` with the retries.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  client: HttpClient.HttpClient,
  settings: RetryPolicy.Settings,
  budget: RetryBudget.RetryBudget
): HttpClient.HttpClient.With<HttpClientError.HttpClientError | ApiUnavailable> =>
  client.pipe(
    HttpClient.mapRequestEffect(withIdempotencyKey),
    HttpClient.transform((send, request) =>
      Effect.gen(function*() {
        const call = yield* CurrentCall
        const safe = RetryPolicy.safeToRepeat(request.method, call.keyHonoured)
        yield* budget.deposit
        for (let attempt = 1;; attempt++) {
          const result = yield* Effect.result(send)
          let refusal: Refusal
          if (result._tag === "Success") {
            const response = result.success
            if (response.status !== 503) return response
            const now = yield* Clock.currentTimeMillis
            refusal = {
              status: 503,
              floorMillis: RetryPolicy.retryAfterMillis(response.headers["retry-after"], now) ?? 0,
              detail: yield* Effect.orElseSucceed(response.text, () => "")
            }
          } else {
            const error = result.failure
            if (error.reason._tag !== "TransportError") return yield* Effect.fail(error)
            refusal = { status: undefined, floorMillis: 0, detail: error.message }
          }
          const gaveUp: GaveUp | undefined = refusal.status === undefined && !safe
            ? "NotSafeToRepeat"
            : attempt >= settings.maxAttempts
            ? "AttemptsExhausted"
            : RetryPolicy.beyondCap(refusal.floorMillis, settings)
            ? "RetryAfterBeyondCap"
            : (yield* budget.withdraw)
            ? undefined
            : "BudgetExhausted"
          if (gaveUp !== undefined) {
            yield* Metric.update(
              Metric.withAttributes(ClientMetrics.gaveUpTotal, { endpoint: call.endpoint, reason: gaveUp }),
              1
            )
            return yield* new ApiUnavailable({
              endpoint: call.endpoint,
              attempts: attempt,
              gaveUp,
              status: refusal.status,
              retryAfterMillis: refusal.status === 503 ? refusal.floorMillis : undefined,
              detail: refusal.detail
            })
          }
          const delayMillis = RetryPolicy.delayFrom(attempt - 1, refusal.floorMillis, settings, yield* Random.next)
          const cause = refusal.status === undefined ? "connection" : "503"
          yield* Metric.update(Metric.withAttributes(ClientMetrics.retriesTotal, { endpoint: call.endpoint, cause }), 1)
          yield* Metric.update(ClientMetrics.retryDelaySeconds, delayMillis / 1000)
          yield* Effect.annotateCurrentSpan({ "retry.attempts": attempt + 1 })
          yield* Effect.sleep(Duration.millis(delayMillis))
        }
      })
    )
  )
