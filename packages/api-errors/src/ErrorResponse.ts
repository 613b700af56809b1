/**
 * The framework-neutral half of this package: a failure in, `{ status, headers, body }` out. No Effect runtime
 * needed; use it from Express, Fastify, `node:http` or anything else that can send a status, headers and JSON.
 *
 * @since 0.1.0
 */
import { Cause } from "effect"
import * as RetryAfter from "./RetryAfter.ts"

/**
 * Body of every 503 for an unavailable database.
 *
 * @since 0.1.0
 */
export const unavailableDetail = "database temporarily unavailable"

/**
 * Body of every 500: nothing about what went wrong leaves the server.
 *
 * @since 0.1.0
 */
export const unexpectedDetail = "An unexpected error occurred"

/**
 * What a failure means for the client:
 * - `Unavailable`: the database is saturated, unreachable, too slow to connect or not accepting connections;
 *   come back later (503).
 * - `Misconfigured`: the server cannot reach its database as configured (bad password, unknown database);
 *   retrying cannot help (500).
 * - `Unexpected`: anything else that reached this far (500).
 *
 * @since 0.1.0
 */
export type Classification =
  | { readonly kind: "Unavailable"; readonly reason: string }
  | { readonly kind: "Misconfigured" }
  | { readonly kind: "Unexpected" }

/**
 * The HTTP answer for a failure: status, headers (lower-case names) and the JSON body.
 *
 * @since 0.1.0
 */
export interface ErrorResponse {
  readonly status: 500 | 503
  readonly headers: Readonly<Record<string, string>>
  readonly body: { readonly detail: string }
}

const tagOf = (u: unknown): unknown =>
  typeof u === "object" && u !== null && "_tag" in u ? (u as { readonly _tag: unknown })._tag : undefined

const reasonOf = (u: unknown): string => {
  const reason = typeof u === "object" && u !== null && "reason" in u
    ? (u as { readonly reason: unknown }).reason
    : undefined
  return typeof reason === "string" ? reason : "Unknown"
}

/**
 * Whether a value is `@resilience/db-session`'s `DatabaseUnavailable` (matched by tag, so that it also works
 * across two copies of that package).
 *
 * @since 0.1.0
 */
export const isDatabaseUnavailable = (
  u: unknown
): u is { readonly _tag: "DatabaseUnavailable"; readonly reason: string } => tagOf(u) === "DatabaseUnavailable"

/**
 * Whether a value is `@resilience/db-session`'s `DatabaseMisconfigured`.
 *
 * @since 0.1.0
 */
export const isDatabaseMisconfigured = (u: unknown): u is { readonly _tag: "DatabaseMisconfigured" } =>
  tagOf(u) === "DatabaseMisconfigured"

/**
 * Whether a value is one of `@resilience/db-session`'s errors (`DatabaseUnavailable`, `DatabaseMisconfigured`,
 * `QueryFailed`).
 *
 * @since 0.1.0
 */
export const isDbError = (u: unknown): boolean => {
  const tag = tagOf(u)
  return tag === "DatabaseUnavailable" || tag === "DatabaseMisconfigured" || tag === "QueryFailed"
}

/**
 * Classifies a failure: an error value, a thrown value, or an Effect `Cause` (where a `DatabaseUnavailable`
 * anywhere, failure or defect, makes the whole cause `Unavailable`).
 *
 * @since 0.1.0
 */
export const classify = (failure: unknown): Classification => {
  if (Cause.isCause(failure)) {
    let misconfigured = false
    for (const reason of failure.reasons) {
      const value = Cause.isFailReason(reason)
        ? reason.error
        : Cause.isDieReason(reason)
        ? reason.defect
        : undefined
      if (isDatabaseUnavailable(value)) return { kind: "Unavailable", reason: reasonOf(value) }
      if (isDatabaseMisconfigured(value)) misconfigured = true
    }
    return misconfigured ? { kind: "Misconfigured" } : { kind: "Unexpected" }
  }
  if (isDatabaseUnavailable(failure)) return { kind: "Unavailable", reason: reasonOf(failure) }
  if (isDatabaseMisconfigured(failure)) return { kind: "Misconfigured" }
  return { kind: "Unexpected" }
}

/**
 * The 503 for an unavailable database, with `Retry-After` set to `retryAfterSeconds`.
 *
 * @since 0.1.0
 */
export const unavailable = (retryAfterSeconds: number): ErrorResponse => ({
  status: 503,
  headers: { "content-type": "application/json", "retry-after": String(retryAfterSeconds) },
  body: { detail: unavailableDetail }
})

/**
 * The opaque 500.
 *
 * @since 0.1.0
 */
export const unexpected: ErrorResponse = {
  status: 500,
  headers: { "content-type": "application/json" },
  body: { detail: unexpectedDetail }
}

/**
 * Maps a failure to its response. `Retry-After` comes from `retryAfter`: integer seconds or a policy
 * (default: `Retry-After: 1`). For a range, pass `random` (a uniform draw in [0, 1), e.g. `Math.random`) to
 * pick a value per response; without it the lower bound is used.
 *
 * @example
 * ```ts
 * const { status, headers, body } = ErrorResponse.fromFailure(error, { retryAfter: RetryAfter.fixed(2) })
 * res.writeHead(status, headers).end(JSON.stringify(body))
 * ```
 *
 * @since 0.1.0
 */
export const fromFailure = (
  failure: unknown,
  options?: {
    readonly retryAfter?: RetryAfter.RetryAfter | number | undefined
    readonly random?: (() => number) | undefined
  }
): ErrorResponse => {
  if (classify(failure).kind !== "Unavailable") return unexpected
  const retryAfter = options?.retryAfter ?? RetryAfter.defaultPolicy
  if (typeof retryAfter === "number") return unavailable(retryAfter)
  const random = options?.random
  return unavailable(random === undefined ? retryAfter.minSeconds : RetryAfter.fromUniform(retryAfter, random()))
}

/**
 * The body as the JSON text to send.
 *
 * @since 0.1.0
 */
export const bodyText = (self: ErrorResponse): string => JSON.stringify(self.body)
