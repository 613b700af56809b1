/**
 * What the transport needs to know about the logical request it is executing: the endpoint's name (for
 * metrics, spans and errors), the bearer token, whether the endpoint honours `Idempotency-Key`, and a key the
 * caller chose. Set by each method of the client for the duration of its call.
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { Redacted } from "effect"

/**
 * The current call.
 *
 * @since 0.1.0
 * @category models
 */
export interface Call {
  readonly endpoint: string
  readonly token: Redacted.Redacted<string> | undefined
  /** The endpoint replays a repeated write with the same key instead of applying it twice. */
  readonly keyHonoured: boolean
  /** A key chosen by the caller (to carry one key across several calls of the same logical write). */
  readonly idempotencyKey: string | undefined
}

/**
 * The current call; outside a call of the client, an anonymous one.
 *
 * @since 0.1.0
 * @category services
 */
export const CurrentCall = Context.Reference<Call>("@resilience/api-client/CurrentCall", {
  defaultValue: () => ({ endpoint: "request", token: undefined, keyHonoured: false, idempotencyKey: undefined })
})
