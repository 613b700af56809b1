/**
 * The seam where a caller decides whether a checkout may open a new connection. A pool asks the
 * {@link ConnectGuard} found in the checkout's context before every connection attempt it makes, and only then:
 * a checkout that reuses an idle connection of the in-process pool makes no attempt and never asks. The default
 * lets every attempt through, so the session behaves as without it.
 *
 * A process that backs off a refusing database (the deriver's checkout gate) provides a guard that holds
 * attempts back while its circuit is open, and learns from the attempts alone: an answer from a connection the
 * pool already had is no evidence that the database accepts connections again. That is what keeps an
 * in-process pool's attempts during an outage on one schedule per process instead of one per worker.
 *
 * @since 0.2.0
 */
import { Context, type Effect } from "effect"
import * as Classify from "./Classify.ts"
import type { RawConnection } from "./Driver.ts"
import type { CheckoutError } from "./Errors.ts"

/**
 * Runs one connection attempt, or holds it back: `attempt` is the pool's single attempt (already bounded by
 * the connect timeout); the guard may wait before it, fail instead of it (with a `DatabaseUnavailable` coded
 * {@link heldCode}), and observe how it ended. It must not run it twice. The `queue` pool's `attempt` first takes a
 * slot of the pool (a checkout holds none while its guard waits): it may end in `POOL_EXHAUSTED`
 * (`Classify.isPoolExhausted`) with no connection tried, which is no evidence about the database.
 *
 * @since 0.2.0
 * @category models
 */
export interface Guard {
  readonly attempt: (
    attempt: Effect.Effect<RawConnection, CheckoutError>
  ) => Effect.Effect<RawConnection, CheckoutError>
}

/**
 * The code of the `DatabaseUnavailable` a guard fails with when it makes no attempt (its process is backing off
 * the database): no connection was tried, so it is no evidence about the database either
 * (`Classify.isAttemptHeld` asks).
 *
 * @since 0.2.0
 * @category constants
 */
export const heldCode: typeof Classify.attemptHeldCode = Classify.attemptHeldCode

/**
 * The guard of the current checkout; by default every attempt goes ahead.
 *
 * @since 0.2.0
 * @category services
 */
export const ConnectGuard: Context.Reference<Guard> = Context.Reference<Guard>("@resilience/db-session/ConnectGuard", {
  defaultValue: () => ({ attempt: (attempt) => attempt })
})
