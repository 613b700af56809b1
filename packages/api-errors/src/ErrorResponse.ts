/**
 * The framework-neutral half of this package: a failure in, `{ status, headers, body }` out. No Effect runtime
 * needed; use it from Express, Fastify, `node:http` or anything else that can send a status, headers and JSON.
 *
 * @since 0.1.0
 */
// The table alone (no driver, no pool): framework-neutral users and the API contract load no server code.
import * as Classify from "@resilience/db-session/Classify"
import { Cause } from "effect"
import * as RetryAfter from "./RetryAfter.ts"

/**
 * Body of every 503 for an unavailable database.
 *
 * @since 0.1.0
 * @category constants
 */
export const unavailableDetail = "database temporarily unavailable"

/**
 * Body of every 500: nothing about what went wrong leaves the server.
 *
 * @since 0.1.0
 * @category constants
 */
export const unexpectedDetail = "An unexpected error occurred"

/**
 * What a failure means for the client, read from `@resilience/db-session`'s table (`Classify`):
 * - `Unavailable`: the database is saturated, unreachable, too slow to connect or not accepting connections;
 *   come back later (503).
 * - `Transient`: the statement failed for a reason that passes by itself (read-only after a failover, a
 *   deadlock, a statement timeout, resource exhaustion); come back later (503). `reason` is the table's name.
 * - `Misconfigured`: the server cannot reach or use its database as configured (bad password, unknown
 *   database, schema not migrated); retrying cannot help (500).
 * - `Unexpected`: anything else that reached this far, including a permanent database error that no handler
 *   turned into a 4xx (500).
 *
 * @since 0.1.0
 * @category models
 */
export type Classification =
  | { readonly kind: "Unavailable"; readonly reason: string }
  | { readonly kind: "Transient"; readonly reason: string }
  | { readonly kind: "Misconfigured" }
  | { readonly kind: "Unexpected" }

/**
 * The HTTP answer for a failure: status, headers (lower-case names) and the JSON body.
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorResponse {
  readonly status: 500 | 503
  readonly headers: Readonly<Record<string, string>>
  readonly body: { readonly detail: string }
}

/**
 * Whether a value is one of `@resilience/db-session`'s errors (`DatabaseUnavailable`, `DatabaseMisconfigured`,
 * `QueryFailed`), or a request the admission gate shed ({@link isShed}); matched by tag, so that it also works
 * across two copies of those packages.
 *
 * @since 0.1.0
 * @category predicates
 */
export const isDbError = (u: unknown): boolean => Classify.isDbError(u) || isShed(u)

/**
 * Whether a value is `@resilience/admission`'s `AdmissionShed`: the admission gate refused the request before it
 * touched the database. To a client that is the same as an unavailable database (503, `Retry-After`); its
 * `reason` (`CircuitOpen`, `ProbeInFlight`, `QueueTimeout`) is the kind in logs and metrics. Matched by tag, so
 * neither package depends on the other.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isShed = (u: unknown): u is { readonly _tag: "AdmissionShed"; readonly reason: string } =>
  typeof u === "object" && u !== null && "_tag" in u && u._tag === "AdmissionShed" && "reason" in u &&
  typeof u.reason === "string"

/**
 * Whether the answer to a failure is a 503 (the database is unavailable, or the statement failed transiently).
 * @deprecated since 0.3.0: used only inside this module; no longer exported from the next minor release.
 * @since 0.2.0
 * @category predicates
 */
export const isTemporary = (u: unknown): boolean => {
  const { kind } = classify(u)
  return kind === "Unavailable" || kind === "Transient"
}

/**
 * The least `Retry-After`, in whole seconds, that a shed request in `cause` asks for: an open circuit's
 * remaining window (`retryAfterMillis`, rounded up, at most {@link RetryAfter.maxAllowedSeconds}); 0 when there
 * is none. A 503 takes the larger of this and its policy's draw, so a client that honours `Retry-After` does
 * not come back while the circuit would shed it anyway.
 *
 * @since 0.2.0
 * @category decisions
 */
export const shedRetryAfterSeconds = (cause: Cause.Cause<unknown>): number => {
  let millis = 0
  for (const reason of cause.reasons) {
    const value = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    if (isShed(value) && "retryAfterMillis" in value && typeof value.retryAfterMillis === "number") {
      millis = Math.max(millis, value.retryAfterMillis)
    }
  }
  return Math.min(RetryAfter.maxAllowedSeconds, Math.ceil(millis / 1000))
}

const ofValue = (value: unknown): Classification | undefined => {
  if (isShed(value)) return { kind: "Unavailable", reason: value.reason }
  const condition = Classify.conditionOf(value)
  switch (condition?.meaning) {
    case "unavailable":
      return { kind: "Unavailable", reason: condition.name }
    case "transient":
      return { kind: "Transient", reason: condition.name }
    case "misconfigured":
      return { kind: "Misconfigured" }
    default:
      return undefined
  }
}

const rank = (classification: Classification | undefined): number =>
  classification === undefined ? 0 : classification.kind === "Misconfigured" ? 1 : 2

/**
 * Classifies a failure: an error value, a thrown value, or an Effect `Cause`. In a cause, a failure or defect
 * that means "come back later" (unavailable or transient) wins over a misconfiguration, which wins over
 * everything else.
 *
 * @since 0.1.0
 * @category decisions
 */
export const classify = (failure: unknown): Classification => {
  if (!Cause.isCause(failure)) return ofValue(failure) ?? { kind: "Unexpected" }
  let found: Classification | undefined
  for (const reason of failure.reasons) {
    const value = Cause.isFailReason(reason)
      ? reason.error
      : Cause.isDieReason(reason)
      ? reason.defect
      : undefined
    const classification = ofValue(value)
    if (rank(classification) > rank(found)) found = classification
  }
  return found ?? { kind: "Unexpected" }
}

/**
 * The 503 for an unavailable database, with `Retry-After` set to `retryAfterSeconds`.
 *
 * @since 0.1.0
 * @category decisions
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
 * @category constants
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
 * @category constructors
 */
export const fromFailure = (
  failure: unknown,
  options?: {
    readonly retryAfter?: RetryAfter.RetryAfter | number | undefined
    readonly random?: (() => number) | undefined
  }
): ErrorResponse => {
  if (!isTemporary(failure)) return unexpected
  const retryAfter = options?.retryAfter ?? RetryAfter.defaultPolicy
  if (typeof retryAfter === "number") return unavailable(retryAfter)
  const random = options?.random
  return unavailable(random === undefined ? retryAfter.minSeconds : RetryAfter.fromUniform(retryAfter, random()))
}

/**
 * The body as the JSON text to send.
 *
 * @since 0.1.0
 * @category decisions
 */
export const bodyText = (self: ErrorResponse): string => JSON.stringify(self.body)
