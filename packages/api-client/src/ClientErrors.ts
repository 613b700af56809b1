/**
 * What a call of the client can fail with: the API stayed unavailable (after the retries the budget and the
 * options allowed), the API rejected the request (4xx other than 401/403, or an opaque 500), or the token was
 * missing or not good for this request.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Why the client stopped retrying an unavailable API:
 * - `BudgetExhausted`: the retry budget had no token left (the fleet-wide bound on retries);
 * - `AttemptsExhausted`: `maxAttempts` reached;
 * - `RetryAfterBeyondCap`: the server asked for a wait longer than `maxDelay`;
 * - `NotSafeToRepeat`: the connection failed on a request that may have reached the server and cannot be
 *   repeated safely.
 *
 * @since 0.1.0
 * @category schemas
 */
export const GaveUp = Schema.Literals([
  "BudgetExhausted",
  "AttemptsExhausted",
  "RetryAfterBeyondCap",
  "NotSafeToRepeat"
])

/**
 * Why the client stopped retrying.
 *
 * @since 0.1.0
 * @category models
 */
export type GaveUp = typeof GaveUp.Type

/**
 * The API stayed unavailable: its last answer was a 503 (`status` 503, `retryAfterMillis` what it asked for) or
 * the connection failed (`status` undefined).
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiUnavailable extends Schema.TaggedError<ApiUnavailable>()("ApiUnavailable", {
  endpoint: Schema.String,
  attempts: Schema.Int,
  gaveUp: GaveUp,
  status: Schema.UndefinedOr(Schema.Int),
  retryAfterMillis: Schema.UndefinedOr(Schema.Number),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.endpoint}: API unavailable after ${this.attempts} attempt(s) (${this.gaveUp}): ${this.detail}`
  }
}

/**
 * The API rejected the request: `status` 400 (validation, `detail` names the field), 404, 409, 413, 422, or an
 * opaque 500; retrying the same request cannot help.
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiRejected extends Schema.TaggedError<ApiRejected>()("ApiRejected", {
  endpoint: Schema.String,
  status: Schema.Int,
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.endpoint}: rejected with ${this.status}: ${this.detail}`
  }
}

/**
 * No token (401), or a token that does not grant this request (403).
 *
 * @since 0.1.0
 * @category errors
 */
export class ApiUnauthorized extends Schema.TaggedError<ApiUnauthorized>()("ApiUnauthorized", {
  endpoint: Schema.String,
  status: Schema.Literals([401, 403]),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.endpoint}: ${this.status === 401 ? "unauthorised" : "forbidden"}: ${this.detail}`
  }
}

/**
 * Every failure of a call.
 *
 * @since 0.1.0
 * @category models
 */
export type ClientError = ApiUnavailable | ApiRejected | ApiUnauthorized
