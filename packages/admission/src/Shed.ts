/**
 * The one error of the gate: this request was not admitted, and made no connection attempt.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Why a request was shed:
 * - `QueueTimeout`: every permit of the current limit was taken for longer than the queueing bound;
 * - `CircuitOpen`: the database was unavailable a moment ago and the open window has not ended;
 * - `ProbeInFlight`: the window ended and one probe request is finding out whether the database is back.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Reason = Schema.Literals(["QueueTimeout", "CircuitOpen", "ProbeInFlight"])

/**
 * Why a request was shed.
 *
 * @since 0.1.0
 * @category models
 */
export type Reason = typeof Reason.Type

/**
 * A request the gate refused before it touched the database. Answer it like an unavailable database (HTTP:
 * 503 with `Retry-After`; `@resilience/api-errors` does).
 *
 * @since 0.1.0
 * @category errors
 */
export class Shed extends Schema.TaggedError<Shed>()("AdmissionShed", {
  reason: Reason,
  /** For `CircuitOpen`: how long until the circuit lets a probe through (a floor for `Retry-After`). */
  retryAfterMillis: Schema.optional(Schema.Finite)
}) {
  override get message(): string {
    return `request shed by the admission gate (${this.reason}); no connection attempt was made`
  }
}

/**
 * Whether a value is a {@link Shed} (matched by tag, so two copies of this package agree).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isShed = (u: unknown): u is Shed =>
  typeof u === "object" && u !== null && "_tag" in u && (u as { readonly _tag: unknown })._tag === "AdmissionShed"
