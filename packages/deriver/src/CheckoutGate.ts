/**
 * One back-off state per deriver process for every checkout it makes (the poll's and the workers'), so the
 * whole process backs off a database that refuses connections, not only its poll loop.
 *
 * An AIMD limit on concurrent checkouts, as TCP does on its window: it starts at `maxLimit` (the workers plus
 * the poller). An unavailable checkout halves it (at least 1) and holds it there until a probe time drawn
 * from the shared jittered back-off (base, ×multiplier, capped); a success after that time raises it by one
 * (the back-off keeps growing across failed probes until the limit is back at its maximum).
 * While the limit is above what the server accepts, the checkouts beyond it are the ones that need a new
 * connection: an in-process pool that still holds connections keeps working on them at the lowered limit,
 * and asks for a new connection only once per probe time. An unavailable checkout at limit 1 (nothing
 * works) blocks every checkout until the probe time, when one goes. Attempts during an outage therefore
 * follow one schedule per process, the same as the poll loop's, instead of one per worker.
 *
 * The decisions are pure functions of the state, the clock and a uniform draw; {@link make} wraps them for
 * the deriver.
 *
 * @since 0.2.0
 */
import { PollBackoff } from "@resilience/jitter"
import { Cause, Clock, Data, Deferred, Duration, Effect, Exit, Option, Random } from "effect"

/**
 * The gate's state.
 *
 * @since 0.2.0
 */
export interface State {
  /** Concurrent checkouts allowed (1 ≤ limit ≤ maxLimit). */
  readonly limit: number
  readonly maxLimit: number
  /** Checkouts running now. */
  readonly inFlight: number
  /** No checkout starts before this time (an outage at limit 1); 0: not blocked. */
  readonly blockedUntil: number
  /** The limit may not grow before this time (the next probe). */
  readonly growAfter: number
  /** The shared back-off between probes. */
  readonly probe: PollBackoff.State
}

/**
 * The state of a process with `maxLimit` possible concurrent checkouts.
 *
 * @since 0.2.0
 */
export const initial = (maxLimit: number, backoff: PollBackoff.Settings): State => ({
  limit: maxLimit,
  maxLimit,
  inFlight: 0,
  blockedUntil: 0,
  growAfter: 0,
  probe: PollBackoff.initial(backoff)
})

/**
 * Whether a checkout may start now.
 *
 * @since 0.2.0
 */
export const canStart = (state: State, now: number): boolean =>
  now >= state.blockedUntil && state.inFlight < Math.floor(state.limit)

/**
 * Whether the gate is blocked (an outage at limit 1) at `now`.
 *
 * @since 0.2.0
 */
export const isBlocked = (state: State, now: number): boolean => now < state.blockedUntil

/**
 * How many more checkouts may start now (what the poller may claim for: a unit needs a checkout to start).
 *
 * @since 0.2.0
 */
export const headroom = (state: State, now: number): number =>
  isBlocked(state, now) ? 0 : Math.max(0, Math.floor(state.limit) - state.inFlight)

/**
 * A checkout starts.
 *
 * @since 0.2.0
 */
export const started = (state: State): State => ({ ...state, inFlight: state.inFlight + 1 })

/**
 * A checkout ended without an unavailability: additive increase (by one) once the probe time has passed. The
 * probe back-off is not reset by the growth itself (a success may have used a kept connection, not a new
 * one): only when the limit is back at its maximum, or when a checkout succeeds after a block (nothing
 * worked, so this one needed a new connection, and got it).
 *
 * @since 0.2.0
 */
export const succeeded = (state: State, backoff: PollBackoff.Settings, now: number): State => {
  const inFlight = state.inFlight - 1
  const probe = state.blockedUntil > 0 ? PollBackoff.initial(backoff) : state.probe
  if (now < state.growAfter || state.limit >= state.maxLimit) return { ...state, inFlight, blockedUntil: 0, probe }
  const limit = Math.min(state.maxLimit, Math.floor(state.limit) + 1)
  return {
    ...state,
    inFlight,
    blockedUntil: 0,
    limit,
    probe: limit >= state.maxLimit ? PollBackoff.initial(backoff) : probe
  }
}

/**
 * A checkout was interrupted: it tells nothing about the database.
 *
 * @since 0.2.0
 */
export const interrupted = (state: State): State => ({ ...state, inFlight: state.inFlight - 1 })

/**
 * A checkout found the database unavailable: multiplicative decrease (halve, at least 1) and no growth
 * before the next probe time `now + jitter(probe)`. The probe back-off steps once per failed probe, not once
 * per failed checkout (a burst of failures of checkouts that were already running counts once). A checkout
 * that started at limit 1 and failed means nothing works: every checkout then waits for the probe time.
 *
 * @since 0.2.0
 */
export const unavailable = (
  state: State,
  backoff: PollBackoff.Settings,
  now: number,
  u: number,
  startedAtLimit: number = state.limit
): State => {
  const inFlight = state.inFlight - 1
  const limit = Math.max(1, Math.floor(state.limit / 2))
  const alone = Math.floor(startedAtLimit) <= 1
  if (now < state.growAfter) {
    // Already backing off: the probe time stands.
    return { ...state, inFlight, limit, blockedUntil: alone ? state.growAfter : state.blockedUntil }
  }
  const probeAt = now + PollBackoff.sleepFrom(state.probe, backoff, u)
  return {
    ...state,
    inFlight,
    limit,
    growAfter: probeAt,
    blockedUntil: alone ? probeAt : state.blockedUntil,
    probe: PollBackoff.step(state.probe, backoff)
  }
}

/**
 * No permit was free for a checkout that could not wait.
 *
 * @since 0.2.0
 */
export class GateFull extends Data.TaggedError("GateFull")<{}> {}

/**
 * The gate a deriver's checkouts go through.
 *
 * @since 0.2.0
 */
export interface CheckoutGate {
  /** Runs one checkout under the gate: waits for a permit (interruptibly), then records how it ended. */
  readonly run: <A, E, R>(checkout: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Runs one checkout under the gate if a permit is free now, else fails with {@link GateFull} at once (for
   * a caller that must not wait, such as the poll's uninterruptible claim).
   */
  readonly runNow: <A, E, R>(checkout: Effect.Effect<A, E, R>) => Effect.Effect<A, E | GateFull, R>
  /** How many checkouts may start now without waiting (0 while blocked). */
  readonly headroom: Effect.Effect<number>
  /** Whether every checkout is held back now (an outage at limit 1). */
  readonly blocked: Effect.Effect<boolean>
  /** The current state, for observers and tests. */
  readonly state: Effect.Effect<State>
}

/**
 * A gate for `maxLimit` concurrent checkouts; `isUnavailable` says which failures mean "no connection".
 *
 * @since 0.2.0
 */
export const make = (options: {
  readonly maxLimit: number
  readonly backoff: PollBackoff.Settings
  readonly isUnavailable: (error: unknown) => boolean
}): Effect.Effect<CheckoutGate> =>
  Effect.gen(function*() {
    const { backoff } = options
    let state = initial(options.maxLimit, backoff)
    // Completed on every change that may let a waiter start; replaced after each.
    let changed = yield* Deferred.make<void>()
    const update = (next: State) =>
      Effect.suspend(() => {
        state = next
        const done = changed
        return Deferred.make<void>().pipe(
          Effect.tap((fresh) => Effect.sync(() => (changed = fresh))),
          Effect.andThen(Deferred.succeed(done, undefined))
        )
      })

    /** Waits for a permit; returns the limit in force when the checkout started. */
    const acquire = Effect.gen(function*() {
      while (true) {
        const now = yield* Clock.currentTimeMillis
        if (canStart(state, now)) {
          state = started(state)
          return state.limit
        }
        const wake = changed
        if (isBlocked(state, now)) {
          yield* Effect.raceFirst(Effect.sleep(Duration.millis(state.blockedUntil - now)), Deferred.await(wake))
        } else {
          yield* Deferred.await(wake)
        }
      }
    })

    const settle = <A, E>(exit: Exit.Exit<A, E>, startedAtLimit: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (Exit.isSuccess(exit)) return yield* update(succeeded(state, backoff, now))
        const error = Cause.findErrorOption(exit.cause)
        if (Option.isSome(error) && options.isUnavailable(error.value)) {
          const u = backoff.ratio === 0 ? 0 : yield* Random.next
          return yield* update(unavailable(state, backoff, now, u, startedAtLimit))
        }
        return yield* update(
          Cause.hasInterruptsOnly(exit.cause) ? interrupted(state) : succeeded(state, backoff, now)
        )
      })

    // Waiting for a permit is interruptible (a shutdown must not hang on a blocked gate); once a permit is
    // taken, its release is guaranteed.
    const run = <A, E, R>(checkout: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.uninterruptibleMask((restore) =>
        restore(acquire).pipe(
          Effect.flatMap((limit) => restore(checkout).pipe(Effect.onExit((exit) => settle(exit, limit))))
        )
      )

    const runNow = <A, E, R>(checkout: Effect.Effect<A, E, R>): Effect.Effect<A, E | GateFull, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          if (!canStart(state, now)) return yield* new GateFull()
          state = started(state)
          const limit = state.limit
          return yield* restore(checkout).pipe(Effect.onExit((exit) => settle(exit, limit)))
        })
      )

    return {
      run,
      runNow,
      headroom: Effect.map(Clock.currentTimeMillis, (now) => headroom(state, now)),
      blocked: Effect.map(Clock.currentTimeMillis, (now) => isBlocked(state, now)),
      state: Effect.sync(() => state)
    }
  })
