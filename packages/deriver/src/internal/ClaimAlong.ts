/**
 * Claiming along: whether the statement that releases a unit may claim the worker's next unit too, and how many.
 * The loop alone decides (see `PollLoop.Along`); this holds the two flags it decides with.
 *
 * @internal
 */
import { Clock, Effect } from "effect"
import * as Overload from "../Overload.ts"

/** What the loop tells claiming along about itself, read when a statement starts. */
export interface LoopView {
  /** Whether any unit may be claimed now: no shutdown has begun and no unit claimed ahead is waiting. */
  readonly open: () => boolean
  /** How many more units the process can start, the releasing unit not counted (`blocked`: none, an outage). */
  readonly room: () => Effect.Effect<number | "blocked">
}

/** Claiming along for one loop. */
export interface ClaimAlong {
  /** Runs the statement that releases a unit with how many more units it may claim (0 or 1). */
  readonly along: <A, E, R>(statement: (limit: number) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** After each poll's decision: whether the decision lets a worker claim along. */
  readonly decided: (allowed: boolean) => void
  /** After a poll's claim succeeded: a slow claim along's pause ends. */
  readonly polled: () => void
}

/**
 * Claiming along (`enabled`) while the last decision allowed it and no slow claim along paused it. A statement that
 * claimed along and took longer than the overload's slow-poll threshold, by the database's share of its time (the
 * process's own lag, read from `lag`, left out), pauses it until the poller's next claim succeeds.
 */
export const make = (
  enabled: boolean,
  view: LoopView,
  overload: Overload.Settings | undefined,
  lag: Effect.Effect<number>
): ClaimAlong => {
  let allowed = false
  let paused = false
  const limit: Effect.Effect<number> = Effect.suspend(() =>
    !enabled || !allowed || paused || !view.open()
      ? Effect.succeed(0)
      : Effect.map(view.room(), (room) => room === "blocked" ? 0 : Math.min(1, room))
  )
  // That share is at most the elapsed time, so the lag is read again only when the elapsed time alone is past the
  // threshold (this runs once per unit; `LoopLag` makes its system call at most once a millisecond).
  const along = <A, E, R>(statement: (limit: number) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(limit, (n) =>
      n === 0 || overload === undefined
        ? statement(n)
        : Effect.flatMap(Clock.currentTimeMillis, (startedAt) =>
          Effect.flatMap(lag, (lagAtStart) =>
            Effect.tap(statement(n), () =>
              Effect.flatMap(Clock.currentTimeMillis, (now) =>
                now - startedAt <= overload.slowPollMillis
                  ? Effect.void
                  : Effect.map(lag, (lagNow) => {
                    const timing = { elapsedMillis: now - startedAt, lagMillis: lagNow - lagAtStart }
                    if (Overload.databaseMillis(overload, timing) > overload.slowPollMillis) {
                      paused = true
                    }
                  }))))))
  return {
    along,
    decided: (next) => {
      allowed = next
    },
    polled: () => {
      paused = false
    }
  }
}
