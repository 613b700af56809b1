/**
 * One back-off state per deriver process for every checkout it makes (the poll's, the workers', the handlers'
 * through `DbSession`, the shutdown release), so the whole process backs off a database that refuses
 * connections, not only its poll loop.
 *
 * It is `@resilience/admission`'s limiter with the deriver's policy, the same pure functions as the API's gate
 * and the fleet simulator, in two places:
 * - the **limit** (`Limit.update`) on checkouts: concurrent checkouts, starting at `maxLimit` (the workers plus
 *   the poller); an unavailable checkout halves it (at least 1) and starts a hold drawn from the poll backoff
 *   (base, ×multiplier, capped, jittered), during which it does not grow; after the hold every answer adds one;
 * - the **circuit** (`Breaker`) on connection attempts, through db-session's `ConnectGuard`: a pool asks it
 *   before every new connection, and only then. 2 refused of the last 4 attempts open it; while open, every
 *   attempt waits (its checkout gives its permit of the limit back meanwhile), except one probe at a time: the
 *   poll may probe whenever it polls (its own schedule is the spec's jittered backoff, so it adds no attempt), a
 *   waiting worker or the shutdown release only when the circuit's window ends (the poll backoff's schedule
 *   again, stepping once per failed probe). Only attempts teach it: an answer on a connection an in-process pool
 *   already had is no evidence that the database accepts connections, so it neither closes the circuit nor ends
 *   the hold. An answered probe (a new connection) closes it and ends the limit's hold, so a process climbs back
 *   to full speed one answer at a time as soon as the database answers.
 *
 * Attempts during an outage therefore follow one schedule per process instead of one per worker, with either
 * pool class: a `queue` pool keeps working on the connections it has (checkouts that reuse one are not held
 * back) while its new connections wait for the circuit. A checkout that waited in vain for the process's own
 * pool (`POOL_EXHAUSTED`) lowers the limit but makes no attempt and never opens the circuit.
 *
 * The decisions are pure functions of the state, the clock and a uniform draw; {@link make} wraps them for
 * the deriver.
 *
 * @since 0.2.0
 */
import { Breaker, Limit, Outcome } from "@resilience/admission"
import { ConnectGuard, DatabaseUnavailable, DbSession } from "@resilience/db-session"
import type { PollBackoff } from "@resilience/jitter"
import { Cause, Clock, Data, Deferred, Duration, Effect, Exit, Predicate, Random } from "effect"

/**
 * The deriver's policy for its limit and its circuit.
 *
 * @since 0.2.0
 */
export interface Policy {
  readonly limit: Limit.Policy
  readonly breaker: Breaker.Policy
}

/**
 * The policy of a process with `maxLimit` possible concurrent checkouts, backing off on `backoff` (the poll
 * schedule's settings): halve on unavailability, grow on every answer after the hold, trip on 2 of 4.
 *
 * @since 0.2.0
 */
export const policy = (maxLimit: number, backoff: PollBackoff.Settings): Policy => ({
  limit: {
    minConcurrency: 1,
    maxConcurrency: maxLimit,
    decreaseRatio: 0.5,
    slowMillis: 0,
    growth: "always",
    hold: backoff
  },
  breaker: { tripFailures: 2, windows: backoff }
})

/**
 * The gate's state.
 *
 * @since 0.2.0
 */
export interface State {
  readonly limit: Limit.State
  readonly circuit: Breaker.State
  /** Checkouts running now. */
  readonly inFlight: number
}

/**
 * The state of a process at rest: the full limit, the circuit closed.
 *
 * @since 0.2.0
 */
export const initial = (policy: Policy): State => ({
  limit: Limit.start(policy.limit),
  circuit: Breaker.initial(policy.breaker),
  inFlight: 0
})

/**
 * Whether a checkout may start: `pass`, or `full` (the limit is taken); with the state to commit if it
 * starts. The circuit is not asked here: it holds back connection attempts, not checkouts ({@link enterAttempt}).
 *
 * @since 0.2.0
 */
export const admit = (state: State): readonly ["pass" | "full", State] =>
  state.inFlight >= Math.floor(state.limit.limit)
    ? ["full", state]
    : ["pass", { ...state, inFlight: state.inFlight + 1 }]

/**
 * Whether a checkout may make a connection attempt at `now`: `pass`, `probe` (the circuit's one probe) or
 * `shed` (the circuit holds it back); with the state to commit if it goes ahead. `early`: the caller may probe
 * before the circuit's window ends (the poll, whose own schedule spaces its attempts).
 *
 * @since 0.2.0
 */
export const enterAttempt = (state: State, now: number, early = false): readonly [Breaker.Decision, State] => {
  const [decision, circuit] = Breaker.enter(state.circuit, now, early)
  return decision === "shed" ? ["shed", state] : [decision, { ...state, circuit }]
}

/**
 * Whether the poll could make no attempt now: the circuit is not closed and a probe is running.
 *
 * @since 0.2.0
 */
export const isBlocked = (state: State, now: number): boolean => Breaker.enter(state.circuit, now, true)[0] === "shed"

/**
 * How many more checkouts may start now (what the poller may claim for: a unit needs a checkout to start); 0
 * while blocked.
 *
 * @since 0.2.0
 */
export const headroom = (state: State, now: number): number =>
  isBlocked(state, now) ? 0 : Math.max(0, Math.floor(state.limit.limit) - state.inFlight)

/**
 * A checkout ended at `now` with `outcome` (`@resilience/admission`'s reading of its exit); `u`: a uniform draw
 * for the jitter of a new hold. The limit learns from it.
 *
 * @since 0.2.0
 */
export const settle = (
  state: State,
  policy: Policy,
  outcome: Outcome.Outcome,
  now: number,
  u: number
): State => ({
  ...state,
  limit: Limit.update(state.limit, { outcome, inFlight: state.inFlight, millis: 0 }, policy.limit, now, u),
  inFlight: state.inFlight - 1
})

/**
 * A connection attempt ended at `now` with `outcome`; `probe`: it was the circuit's probe; `u`: a uniform draw
 * for the jitter of a new window. Only attempts teach the circuit: an answer on a connection the pool already
 * had says nothing about whether the database accepts connections. The circuit closing (a new connection
 * after an outage) ends the limit's hold.
 *
 * @since 0.2.0
 */
export const settleAttempt = (
  state: State,
  policy: Policy,
  outcome: Outcome.Outcome,
  probe: boolean,
  now: number,
  u: number
): State => {
  const circuit = Breaker.settle(state.circuit, policy.breaker, {
    outcome: Outcome.toBreaker(outcome),
    probe,
    now,
    draw: () => u
  })
  const reopened = state.circuit.phase !== "Closed" && circuit.phase === "Closed"
  return { ...state, circuit, limit: reopened ? Limit.recovered(state.limit, policy.limit) : state.limit }
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
  /**
   * Runs one checkout under the gate: waits for a permit of the limit (interruptibly), and, if the checkout
   * needs a new connection while the circuit is open, for the circuit's window; then records how it ended.
   */
  readonly run: <A, E, R>(checkout: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /**
   * Runs one checkout under the gate if it may start now, else fails with {@link GateFull} at once: for a
   * caller that must not wait (the poll's claim, the shutdown release). A connection attempt it needs while
   * the circuit holds attempts back is not made: the checkout fails with a `DatabaseUnavailable` coded
   * `ConnectGuard.heldCode`. With `early` (the poll, whose own schedule spaces its attempts) it may be the
   * circuit's probe before the window ends.
   */
  readonly runNow: <A, E, R>(
    checkout: Effect.Effect<A, E, R>,
    options?: { readonly early?: boolean | undefined }
  ) => Effect.Effect<A, E | GateFull, R>
  /** How many checkouts may start now without waiting (0 while blocked). */
  readonly headroom: Effect.Effect<number>
  /** Whether the poll could make no attempt now (the circuit's probe is running). */
  readonly blocked: Effect.Effect<boolean>
  /** The current state, for observers and tests. */
  readonly state: Effect.Effect<State>
}

/**
 * A gate for `maxLimit` concurrent checkouts backing off on `backoff`; `classify` reads a checkout's exit for
 * the limit (default: `@resilience/admission`'s `Outcome.ofExit`; a classifier that never says `Unavailable`,
 * `Overloaded` or `Exhausted` gives a fixed cap of `maxLimit` checkouts). The circuit always reads connection
 * attempts with `Outcome.ofExit`: attempts follow one schedule per process whatever the limit does.
 *
 * @since 0.2.0
 */
export const make = (options: {
  readonly maxLimit: number
  readonly backoff: PollBackoff.Settings
  readonly classify?: ((exit: Exit.Exit<unknown, unknown>) => Outcome.Outcome) | undefined
}): Effect.Effect<CheckoutGate> =>
  Effect.gen(function*() {
    const rules = policy(options.maxLimit, options.backoff)
    const classify = options.classify ?? Outcome.ofExit
    let state = initial(rules)
    /** Why the last failed attempt failed: the reason a held-back attempt reports. */
    let lastReason: DatabaseUnavailable["reason"] = "Saturated"
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
    const draw = options.backoff.ratio === 0 ? Effect.succeed(0) : Random.next

    /** Waits for a permit of the limit. */
    const acquire = Effect.gen(function*() {
      while (true) {
        const [decision, next] = admit(state)
        if (decision === "pass") {
          state = next
          return
        }
        yield* Deferred.await(changed)
      }
    })

    /**
     * Waits until a connection attempt may go ahead; returns whether it is the circuit's probe. While it waits
     * for the circuit, the checkout gives its permit of the limit back (a checkout waiting to connect holds no
     * connection), and takes one again before its attempt, so waiters resume within the limit.
     */
    const enterWaiting = Effect.suspend(() => {
      let parked = false
      return Effect.gen(function*() {
        while (true) {
          const now = yield* Clock.currentTimeMillis
          const [decision, next] = enterAttempt(state, now)
          if (decision !== "shed" && !parked) {
            state = next
            return decision === "probe"
          }
          if (decision !== "shed" && state.inFlight < Math.floor(state.limit.limit)) {
            state = { ...next, inFlight: next.inFlight + 1 }
            parked = false
            return decision === "probe"
          }
          if (!parked) {
            parked = true
            yield* update({ ...state, inFlight: state.inFlight - 1 })
          }
          const wake = changed
          const until = decision === "shed" ? Breaker.retryAfterMillis(state.circuit, now) : 0
          yield* until > 0
            ? Effect.raceFirst(Effect.sleep(Duration.millis(until)), Deferred.await(wake))
            : Deferred.await(wake)
        }
      }).pipe(
        // Interrupted while parked: take the permit back, so that the checkout's own release balances.
        Effect.onInterrupt(() =>
          Effect.sync(() => {
            if (parked) state = { ...state, inFlight: state.inFlight + 1 }
          })
        )
      )
    })

    /** Lets a connection attempt go ahead now, or fails without making it. */
    const enterNow = (early: boolean) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const [decision, next] = enterAttempt(state, now, early)
        if (decision === "shed") {
          const wait = Breaker.retryAfterMillis(state.circuit, now)
          return yield* new DatabaseUnavailable({
            reason: lastReason,
            code: ConnectGuard.heldCode,
            message:
              `no connection attempt: this process is backing off the database (its circuit is open; the next probe in ${
                Math.ceil(wait)
              } ms)`,
            elapsedMillis: 0
          })
        }
        state = next
        return decision === "probe"
      })

    const settleAttemptExit = (exit: Exit.Exit<unknown, unknown>, probe: boolean) =>
      Effect.gen(function*() {
        if (Exit.isFailure(exit)) {
          const failure = exit.cause.reasons.find(Cause.isFailReason)?.error
          if (Predicate.isTagged(failure, "DatabaseUnavailable")) lastReason = (failure as DatabaseUnavailable).reason
        }
        const now = yield* Clock.currentTimeMillis
        const outcome = Outcome.ofExit(exit)
        // The draw only when a window opens, as the API's circuit and the simulator take it.
        const u = Breaker.opens(state.circuit, rules.breaker, Outcome.toBreaker(outcome), probe) ? yield* draw : 0
        return yield* update(settleAttempt(state, rules, outcome, probe, now, u))
      })

    /** The guard a checkout's connection attempts go through: waiting (`run`) or not (`runNow`). */
    const guard = (enter: Effect.Effect<boolean, DatabaseUnavailable>): ConnectGuard.Guard => ({
      attempt: (connect) =>
        Effect.uninterruptibleMask((restore) =>
          restore(enter).pipe(
            Effect.flatMap((probe) => restore(connect).pipe(Effect.onExit((exit) => settleAttemptExit(exit, probe))))
          )
        )
    })
    const waiting = guard(enterWaiting)
    const now = guard(enterNow(false))
    const early = guard(enterNow(true))

    const settleExit = (exit: Exit.Exit<unknown, unknown>) =>
      Effect.gen(function*() {
        const at = yield* Clock.currentTimeMillis
        return yield* update(settle(state, rules, classify(exit), at, yield* draw))
      })

    // Waiting for a permit is interruptible (a shutdown must not hang on a blocked gate); once a permit is
    // taken, its release is guaranteed.
    const run = <A, E, R>(checkout: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.uninterruptibleMask((restore) =>
        restore(acquire).pipe(
          Effect.flatMap(() =>
            restore(Effect.provideService(checkout, ConnectGuard.ConnectGuard, waiting)).pipe(
              Effect.onExit((exit) => settleExit(exit))
            )
          )
        )
      )

    const runNow = <A, E, R>(
      checkout: Effect.Effect<A, E, R>,
      runOptions?: { readonly early?: boolean | undefined }
    ): Effect.Effect<A, E | GateFull, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const [decision, next] = admit(state)
          if (decision === "full") return yield* new GateFull()
          state = next
          const attempts = runOptions?.early === true ? early : now
          return yield* restore(Effect.provideService(checkout, ConnectGuard.ConnectGuard, attempts)).pipe(
            Effect.onExit((exit) => settleExit(exit))
          )
        })
      )

    return {
      run,
      runNow,
      headroom: Effect.map(Clock.currentTimeMillis, (at) => headroom(state, at)),
      blocked: Effect.map(Clock.currentTimeMillis, (at) => isBlocked(state, at)),
      state: Effect.sync(() => state)
    }
  })

/**
 * `session` with every checkout (each method of the service is one) through `gate`: what a deriver's handlers
 * get as their `DbSession`, so the checkouts they make back off with the rest of the process. Inside
 * `oneCheckout` the pinned session is db-session's own (one checkout, one permit).
 *
 * @since 0.2.0
 */
export const session = (gate: CheckoutGate, session: DbSession["Service"]): DbSession["Service"] =>
  DbSession.of({
    withConnection: (f) => gate.run(session.withConnection(f)),
    transaction: (f) => gate.run(session.transaction(f)),
    query: (sql, params) => gate.run(session.query(sql, params)),
    oneCheckout: (effect) => gate.run(session.oneCheckout(effect))
  })
