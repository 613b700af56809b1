/**
 * One back-off state per deriver process for every checkout it makes (the poll's, the workers', the handlers'
 * through `DbSession`, the shutdown release), so the whole process backs off a database that refuses
 * connections, not only its poll loop.
 *
 * It is `@resilience/admission`'s limiter with the deriver's policy, the same pure functions as the API's gate
 * and the fleet simulator:
 * - the **limit** (`Limit.update`): concurrent checkouts, starting at `maxLimit` (the workers plus the poller);
 *   an unavailable checkout halves it (at least 1) and starts a hold drawn from the poll backoff (base,
 *   ×multiplier, capped, jittered), during which it does not grow; after the hold every answer adds one. While
 *   the limit is above what the server accepts, the checkouts beyond it are the ones that need a new
 *   connection: an in-process pool keeps working on the connections it has at the lowered limit and asks for a
 *   new one once per hold;
 * - the **circuit** (`Breaker`): 2 unavailable of the last 4 checkouts open it (nothing works); while open,
 *   every checkout waits, except one probe at a time: the poll may probe whenever it polls (its own schedule is
 *   the spec's jittered backoff, so it adds no attempt), a waiting worker or the shutdown release only when the
 *   circuit's window ends (the poll backoff's schedule again, stepping once per failed probe). An answered probe closes it and ends the
 *   limit's hold, so a process climbs back to full speed one answer at a time as soon as the database answers.
 *
 * Attempts during an outage therefore follow one schedule per process instead of one per worker; a checkout
 * that waited in vain for the process's own pool (`POOL_EXHAUSTED`) lowers the limit but is no evidence about
 * the database and never opens the circuit.
 *
 * The decisions are pure functions of the state, the clock and a uniform draw; {@link make} wraps them for
 * the deriver.
 *
 * @since 0.2.0
 */
import { Breaker, Limit, Outcome } from "@resilience/admission"
import { DbSession } from "@resilience/db-session"
import type { PollBackoff } from "@resilience/jitter"
import { Clock, Data, Deferred, Duration, Effect, type Exit, Random } from "effect"

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
 * Whether a checkout may start at `now`: `pass`, `probe` (the circuit's one probe), `full` (the limit is taken)
 * or `shed` (the circuit holds it back); with the state to commit if it starts. `early`: the caller may probe
 * before the circuit's window ends (the poll, whose own schedule spaces its attempts).
 *
 * @since 0.2.0
 */
export const admit = (
  state: State,
  now: number,
  early = false
): readonly [Breaker.Decision | "full", State] => {
  if (state.inFlight >= Math.floor(state.limit.limit)) return ["full", state]
  const [decision, circuit] = Breaker.enter(state.circuit, now, early)
  if (decision === "shed") return ["shed", state]
  return [decision, { ...state, circuit, inFlight: state.inFlight + 1 }]
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
 * A checkout ended at `now` with `outcome` (`@resilience/admission`'s reading of its exit); `probe`: it was the
 * circuit's probe; `u`: a uniform draw for the jitter of a new window or hold. The limit and the circuit learn
 * from it; the circuit closing (the database answered after an outage) ends the limit's hold.
 *
 * @since 0.2.0
 */
export const settle = (
  state: State,
  policy: Policy,
  outcome: Outcome.Outcome,
  probe: boolean,
  now: number,
  u: number
): State => {
  const circuit = Breaker.settle(state.circuit, policy.breaker, Outcome.toBreaker(outcome), probe, now, u)
  const limit = Limit.update(state.limit, { outcome, inFlight: state.inFlight, millis: 0 }, policy.limit, now, u)
  const reopened = state.circuit.phase !== "Closed" && circuit.phase === "Closed"
  return {
    limit: reopened ? Limit.recovered(limit, policy.limit) : limit,
    circuit,
    inFlight: state.inFlight - 1
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
   * Runs one checkout under the gate if it may start now, else fails with {@link GateFull} at once: for a
   * caller that must not wait (the poll's claim, the shutdown release). With `early` (the poll, whose own
   * schedule spaces its attempts) it may be the circuit's probe before the window ends.
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
 * A gate for `maxLimit` concurrent checkouts backing off on `backoff`; `classify` reads a checkout's exit
 * (default: `@resilience/admission`'s `Outcome.ofExit`; a classifier that never says `Unavailable`,
 * `Overloaded` or `Exhausted` gives a fixed cap of `maxLimit` checkouts).
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

    /** Waits for a permit; returns whether the checkout is the circuit's probe. */
    const acquire = Effect.gen(function*() {
      while (true) {
        const now = yield* Clock.currentTimeMillis
        const [decision, next] = admit(state, now)
        if (decision === "pass" || decision === "probe") {
          state = next
          return decision === "probe"
        }
        const wake = changed
        if (decision === "shed" && state.circuit.phase === "Open") {
          const until = Breaker.retryAfterMillis(state.circuit, now)
          yield* Effect.raceFirst(Effect.sleep(Duration.millis(until)), Deferred.await(wake))
        } else {
          yield* Deferred.await(wake)
        }
      }
    })

    const settleExit = (exit: Exit.Exit<unknown, unknown>, probe: boolean) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const u = options.backoff.ratio === 0 ? 0 : yield* Random.next
        return yield* update(settle(state, rules, classify(exit), probe, now, u))
      })

    // Waiting for a permit is interruptible (a shutdown must not hang on a blocked gate); once a permit is
    // taken, its release is guaranteed.
    const run = <A, E, R>(checkout: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.uninterruptibleMask((restore) =>
        restore(acquire).pipe(
          Effect.flatMap((probe) => restore(checkout).pipe(Effect.onExit((exit) => settleExit(exit, probe))))
        )
      )

    const runNow = <A, E, R>(
      checkout: Effect.Effect<A, E, R>,
      runOptions?: { readonly early?: boolean | undefined }
    ): Effect.Effect<A, E | GateFull, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const [decision, next] = admit(state, now, runOptions?.early === true)
          if (decision === "full" || decision === "shed") return yield* new GateFull()
          state = next
          return yield* restore(checkout).pipe(Effect.onExit((exit) => settleExit(exit, decision === "probe")))
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
