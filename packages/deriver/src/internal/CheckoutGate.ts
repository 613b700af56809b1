/**
 * One back-off state per deriver process for every checkout it makes (the poll's, the workers', the handlers'
 * through `DbSession`, the shutdown release), so the whole process backs off a database that refuses
 * connections, not only its poll loop.
 *
 * It is `@resilience/admission`'s `Controller` (the same driver as the API's request gate, with the same
 * metrics and logs under `gate="checkout"`) with the deriver's policy, in two places:
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
 * The decisions are the controller's pure functions of the state, the clock and a uniform draw; this module
 * gives it the deriver's policy and wires its two steps to a checkout and to db-session's `ConnectGuard`.
 *
 * @since 0.2.0
 */
import { Controller, type Outcome, type Shed } from "@resilience/admission"
import { Classify, ConnectGuard, DatabaseUnavailable, DbSession } from "@resilience/db-session"
import type { PollBackoff } from "@resilience/jitter"
import { Clock, Data, Deferred, Effect, type Exit, Predicate } from "effect"

/**
 * The policy of a process with `maxLimit` possible concurrent checkouts, backing off on `backoff` (the poll
 * schedule's settings): halve on unavailability, grow on every answer after the hold, trip on 2 of 4.
 *
 * @category policies
 * @since 0.2.0
 */
export const policy = (maxLimit: number, backoff: PollBackoff.Settings): Controller.Policy => ({
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
 * No permit was free for a checkout that could not wait.
 *
 * @category errors
 * @since 0.2.0
 */
export class GateFull extends Data.TaggedError("GateFull")<{}> {}

/**
 * The gate a deriver's checkouts go through.
 *
 * @category models
 * @since 0.2.0
 */
export interface CheckoutGate {
  /**
   * Runs one checkout under the gate: waits for a permit of the limit (interruptibly), and, if the checkout
   * needs a new connection while the circuit is open, for the circuit's window (giving its permit back
   * meanwhile); then records how it ended.
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
  /** Whether the poll could make no attempt now (the circuit's probe is running). */
  readonly blocked: Effect.Effect<boolean>
  /**
   * Evidence that the database answers (a committed write woke this deriver): an open circuit lets its next
   * attempt probe at once, and checkouts waiting for its window look again, so work resumes with the first write
   * after an outage instead of at the circuit's next window. Honoured at most once per base poll interval
   * (1 s by default): each can let one attempt through. Whether it was honoured.
   *
   * @since 0.3.0
   */
  readonly evidence: Effect.Effect<boolean>
  /**
   * Completes at the next {@link evidence} honoured: what a worker backing off between its unit's batches races its
   * sleep with, so the units it holds resume with the first write after an outage too (its retry goes through
   * {@link run}: the circuit still lets one attempt through at a time).
   *
   * @since 0.3.0
   */
  readonly nextEvidence: Effect.Effect<void>
  /** The limit and the circuit now, for observers and tests. */
  readonly state: Effect.Effect<Controller.State>
}

/**
 * A gate for `maxLimit` concurrent checkouts backing off on `backoff`: `@resilience/admission`'s `Controller`
 * with {@link policy} and `gate="checkout"`, so its limit and circuit show in the same `admission_*` metrics as
 * the API's gate, and its circuit's transitions are logged the same way. `classify` reads a checkout's exit for
 * the limit (default: `Outcome.ofExit`; a classifier that never says `Unavailable`, `Overloaded` or
 * `Exhausted` gives a fixed cap of `maxLimit` checkouts). The circuit always reads connection attempts with
 * `Outcome.ofExit`: attempts follow one schedule per process whatever the limit does.
 *
 * @category constructors
 * @since 0.2.0
 */
export const make = (options: {
  readonly maxLimit: number
  readonly backoff: PollBackoff.Settings
  readonly classify?: ((exit: Exit.Exit<unknown, unknown>) => Outcome.Outcome) | undefined
}): Effect.Effect<CheckoutGate> =>
  Effect.gen(function*() {
    const controller = yield* Controller.make({
      policy: policy(options.maxLimit, options.backoff),
      gate: "checkout",
      holds: "connection attempts"
    })
    const classify = options.classify
    /** Why the last failed attempt failed: the reason a held-back attempt reports. */
    let lastReason: DatabaseUnavailable["reason"] = "Saturated"
    const remember = <A, E, R>(connect: Effect.Effect<A, E, R>) =>
      Effect.tapError(connect, (error) =>
        Effect.sync(() => {
          // a wait in vain for the process's own pool inside the guard (`queue` pool) tried no connection
          if (Predicate.isTagged(error, "DatabaseUnavailable") && !Classify.isPoolExhausted(error)) {
            lastReason = (error as unknown as DatabaseUnavailable).reason
          }
        }))
    const heldBack = (shed: Shed.Shed) =>
      new DatabaseUnavailable({
        reason: lastReason,
        code: ConnectGuard.heldCode,
        message:
          `no connection attempt: this process is backing off the database (its circuit is open; the next probe in ${
            Math.ceil(shed.retryAfterMillis ?? 0)
          } ms)`,
        elapsedMillis: 0
      })

    /** The guard of a checkout's connection attempts: waiting for the circuit with `permit`, or not at all. */
    const waiting = (permit: Controller.Permit): ConnectGuard.Guard => ({
      attempt: (connect) => controller.attempt(remember(connect), { waiting: permit })
    })
    const now = (early: boolean): ConnectGuard.Guard => ({
      attempt: (connect) => controller.attempt(remember(connect), { orElse: heldBack, early })
    })
    const notEarly = now(false)
    const early = now(true)

    const run = <A, E, R>(checkout: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      controller.admit(
        (permit) => Effect.provideService(checkout, ConnectGuard.ConnectGuard, waiting(permit)),
        { wait: "untilFree", classify }
      )

    const runNow = <A, E, R>(
      checkout: Effect.Effect<A, E, R>,
      runOptions?: { readonly early?: boolean | undefined }
    ): Effect.Effect<A, E | GateFull, R> =>
      controller.admit(
        () => Effect.provideService(checkout, ConnectGuard.ConnectGuard, runOptions?.early === true ? early : notEarly),
        { wait: { millis: 0, orElse: () => new GateFull() }, classify }
      )

    /** When evidence was last honoured. */
    let evidencedAt = Number.NEGATIVE_INFINITY
    /** Completed by the next evidence honoured, then replaced. */
    let evidenced = yield* Deferred.make<void>()
    const evidence = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.suspend(() => {
        if (now - evidencedAt < options.backoff.baseMillis) return Effect.succeed(false)
        return Effect.tap(controller.evidence, (opened) =>
          opened
            ? Effect.flatMap(Deferred.make<void>(), (fresh) => {
              evidencedAt = now
              const honoured = evidenced
              evidenced = fresh
              return Deferred.succeed(honoured, undefined)
            })
            : Effect.void)
      }))

    return {
      run,
      runNow,
      evidence,
      nextEvidence: Effect.suspend(() => Deferred.await(evidenced)),
      blocked: Effect.flatMap(controller.state, (state) =>
        Effect.map(Clock.currentTimeMillis, (at) => Controller.blocked(state, at))),
      state: controller.state
    }
  })

/**
 * `session` with every checkout (each method of the service is one) through `gate`: what a deriver's handlers
 * get as their `DbSession`, so the checkouts they make back off with the rest of the process. Inside
 * `oneCheckout` the pinned session is db-session's own (one checkout, one permit).
 *
 * @category combinators
 * @since 0.2.0
 */
export const session = (gate: CheckoutGate, session: DbSession["Service"]): DbSession["Service"] =>
  DbSession.of({
    withConnection: (f) => gate.run(session.withConnection(f)),
    transaction: (f) => gate.run(session.transaction(f)),
    query: (sql, params) => gate.run(session.query(sql, params)),
    oneCheckout: (effect) => gate.run(session.oneCheckout(effect))
  })
