/**
 * The loop's wakes: `@resilience/wake`'s `Coalesce` decisions over a signal that ends the loop's sleep (see
 * `PollLoop.wake`).
 *
 * @internal
 */
import { Coalesce } from "@resilience/wake"
import { Clock, Deferred, Effect, Metric } from "effect"
import * as DeriverMetrics from "../DeriverMetrics.ts"

/** The wakes of one loop. */
export interface WakeLatch {
  /** A wake: ends the sleep (`pollNow`), asks for one more poll after the one in flight, or is coalesced. */
  readonly wake: Effect.Effect<Coalesce.Decision>
  /** A poll starts at `nowMillis`: it covers every wake before; returns what completes on the next `pollNow`. */
  readonly started: (nowMillis: number) => Effect.Effect<Effect.Effect<void>>
  /** A poll finished: whether it succeeded and was a woken one; returns whether a wake asked for one more poll. */
  readonly finished: (poll: { readonly succeeded: boolean; readonly woken: boolean }) => boolean
  /** How long a woken poll waits so that it starts no sooner than `minIntervalMillis` after the last one. */
  readonly delayMillis: (minIntervalMillis: number, nowMillis: number) => number
}

/** The coalesced-wakes series by reason, made once (an API's every write wakes). */
const coalescedBy = {
  coalesced: Metric.withAttributes(DeriverMetrics.wakesCoalesced, { reason: "coalesced" }),
  ignored: Metric.withAttributes(DeriverMetrics.wakesCoalesced, { reason: "ignored" })
}

/**
 * A latch with no wake yet. After a woken poll failed, wakes are ignored until a poll succeeds or `rearmAfterMillis`
 * have passed since the last poll started (`Coalesce.wake`).
 */
export const make = (rearmAfterMillis: number): Effect.Effect<WakeLatch> =>
  Effect.gen(function*() {
    let state = Coalesce.initial
    let signal = yield* Deferred.make<void>()
    const wake: Effect.Effect<Coalesce.Decision> = Effect.flatMap(Clock.currentTimeMillis, (nowMillis) => {
      const [decision, next] = Coalesce.wake(state, nowMillis, rearmAfterMillis)
      state = next
      return Metric.update(DeriverMetrics.wakesReceived, 1).pipe(
        Effect.andThen(
          decision === "coalesced" || decision === "ignored"
            ? Metric.update(coalescedBy[decision], 1)
            : decision === "pollNow"
            ? Deferred.succeed(signal, undefined)
            : Effect.void
        ),
        Effect.as(decision)
      )
    })
    return {
      wake,
      started: (nowMillis) =>
        Effect.map(Deferred.make<void>(), (fresh) => {
          state = Coalesce.started(state, nowMillis)
          signal = fresh
          return Deferred.await(fresh)
        }),
      finished: (poll) => {
        const finished = Coalesce.finished(state, poll)
        state = finished.state
        return finished.again
      },
      delayMillis: (minIntervalMillis, nowMillis) => Coalesce.delayMillis(state, minIntervalMillis, nowMillis)
    }
  })
