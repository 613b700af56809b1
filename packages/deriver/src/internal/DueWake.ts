/**
 * Wakes at known due times: a retry this process recorded will be due at a time it knows, and a poll that claims
 * nothing learns when the earliest item waiting for its time comes due (`Queue.poll`); so instead of leaving the
 * item to whichever poll its schedule makes next (a jittered 1–30 s), the deriver wakes its loop when it comes due. The wake goes through the loop's ordinary `wake` (`PollLoop.wake`): coalesced with any other, never
 * sooner than the wakes' minimum interval after the last poll, ignored while the database is failing, never past
 * an overload floor. Nothing is polled when no due time is known, so an idle deriver with nothing waiting polls as before.
 *
 * The decisions are pure functions of the time and a uniform draw (as `Scheduling`'s): {@link fireAt} says when a
 * due time's wake fires, {@link add} and {@link due} keep the known due times; {@link make} is the thin Effect
 * around them.
 *
 * @since 0.3.0
 */
import { Clock, Duration, Effect, Fiber, Random } from "effect"
import type { Scope } from "effect"

/**
 * When the wake for an item due at `dueAtMillis` fires, for a uniform draw `u` in [0, 1): never before the item is
 * due, never sooner than `floorMillis` from now, then up to `spreadMillis` later (the retry's own time is already
 * jittered; the spread keeps the wakes of items due at one instant from starting polls at that instant).
 *
 * @since 0.3.0
 * @category decisions
 */
export const fireAt = (
  nowMillis: number,
  dueAtMillis: number,
  floorMillis: number,
  spreadMillis: number,
  u: number
): number => Math.max(dueAtMillis, nowMillis + floorMillis) + u * spreadMillis

/**
 * The most due times kept; past it the latest are dropped (their items wait for the loop's own schedule, as
 * they did before this module).
 *
 * @since 0.3.0
 * @category constants
 */
export const maxKnown = 1_000

/**
 * The known due times with `dueAtMillis` added (once), ascending, at most {@link maxKnown}.
 *
 * @since 0.3.0
 * @category decisions
 */
export const add = (known: ReadonlyArray<number>, dueAtMillis: number): ReadonlyArray<number> => {
  if (known.includes(dueAtMillis)) return known
  const index = known.findIndex((at) => at > dueAtMillis)
  const next = index === -1 ? [...known, dueAtMillis] : [...known.slice(0, index), dueAtMillis, ...known.slice(index)]
  return next.length > maxKnown ? next.slice(0, maxKnown) : next
}

/**
 * The known due times split at `nowMillis`: whether any has come (one wake covers them all: a poll claims every
 * due item it has room for) and those still to come.
 *
 * @since 0.3.0
 * @category decisions
 */
export const due = (
  known: ReadonlyArray<number>,
  nowMillis: number
): { readonly come: boolean; readonly later: ReadonlyArray<number> } => {
  const later = known.filter((at) => at > nowMillis)
  return { come: later.length < known.length, later }
}

/**
 * How the wakes are spaced: `floorMillis` the least time from now to a wake (the loop's wake minimum interval),
 * `spreadMillis` the largest delay added after a due time.
 *
 * @since 0.3.0
 * @category models
 */
export interface Settings {
  readonly floorMillis: number
  readonly spreadMillis: number
}

/**
 * The wakes at due times of one loop.
 *
 * @since 0.3.0
 * @category models
 */
export interface DueWake {
  /** An item will be due at `dueAtMillis` (epoch milliseconds, the `Clock`'s): wake the loop then. Returns at once. */
  readonly at: (dueAtMillis: number) => Effect.Effect<void>
  /** The due times still to come (tests, observers). */
  readonly known: Effect.Effect<ReadonlyArray<number>>
}

/**
 * Wakes at due times with `wake` (the loop's; given as an effect so that the loop can be started after this), one
 * timer for the earliest known time, in the current scope (closing it stops the timer).
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (wake: Effect.Effect<unknown>, settings: Settings): Effect.Effect<DueWake, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let known: ReadonlyArray<number> = []
    /** The time the running timer was set for, and its fiber. */
    let armed: { readonly at: number; readonly fiber: Fiber.Fiber<void> } | undefined = undefined

    const arm: Effect.Effect<void> = Effect.gen(function*() {
      const next = known[0]
      if (next === undefined || (armed !== undefined && armed.at <= next)) return
      if (armed !== undefined) yield* Fiber.interrupt(armed.fiber)
      const now = yield* Clock.currentTimeMillis
      const firesAt = fireAt(now, next, settings.floorMillis, settings.spreadMillis, yield* Random.next)
      const fiber = yield* Effect.forkIn(
        Effect.gen(function*() {
          yield* Effect.sleep(Duration.millis(firesAt - now))
          armed = undefined
          const split = due(known, yield* Clock.currentTimeMillis)
          known = split.later
          if (split.come) yield* wake
          yield* arm
        }),
        scope
      )
      armed = { at: next, fiber }
    })

    return {
      at: (dueAtMillis) =>
        Effect.suspend(() => {
          known = add(known, dueAtMillis)
          return arm
        }),
      known: Effect.sync(() => known)
    }
  })
