/**
 * The admission controller: one adaptive limit ({@link Limit}) and one circuit ({@link Breaker}) in front of a
 * process's database work, driven on Effect's `Semaphore` (the limit's permits) and `Latch` (open while the
 * circuit lets attempts through), with the same metrics and logs for every gate that uses it, told apart by
 * their `gate` attribute. The API's request gate ({@link Gate}: `gate="request"`) and the deriver's checkout
 * gate (`@resilience/deriver`'s `CheckoutGate`: `gate="checkout"`) are thin wrappers of it; the fleet simulator
 * calls the pure parts below without Effect.
 *
 * Two steps, each usable alone:
 * - {@link Controller.admit}: a permit of the limit (waiting at most a bound, or until one is free), then the
 *   work; its exit teaches the limit.
 * - {@link Controller.attempt}: the circuit's word on one attempt (go, go as the one probe, or held back), then
 *   the attempt; its exit teaches the circuit. Held back, the caller either fails at once, or waits for the
 *   window, giving its permit back meanwhile (a caller waiting to connect holds no connection).
 *
 * The API asks the circuit per request (around `admit`); the deriver per connection attempt (inside `admit`,
 * through db-session's `ConnectGuard`), so an answer on a connection its pool already had, which is no
 * evidence that the database accepts connections, never closes it.
 *
 * The file reads as the guide's pattern: the policy, the state and its pure transitions (time and a lazy draw
 * in, the next state out), then {@link make}, the thin Effect constructor.
 *
 * @since 0.3.0
 */
import { Clock, Effect, Exit, Latch, Metric, Option, Random, Scope, Semaphore } from "effect"
import * as Breaker from "./Breaker.ts"
import * as Metrics from "./internal/Metrics.ts"
import * as Limit from "./Limit.ts"
import * as Outcome from "./Outcome.ts"
import * as Shed from "./Shed.ts"

// ---------------------------------------------------------------------------------------------------------
// Pure: policy → state → next state

/**
 * What a controller needs to know: the limit's policy and the circuit's.
 *
 * @category models
 * @since 0.3.0
 */
export interface Policy {
  readonly limit: Limit.Policy
  readonly breaker: Breaker.Policy
}

/**
 * A controller's state: the limit (with its hold) and the circuit.
 *
 * @category models
 * @since 0.3.0
 */
export interface State {
  readonly limit: Limit.State
  readonly circuit: Breaker.State
}

/**
 * The state of a process at rest: the full limit, the circuit closed.
 *
 * @category constructors
 * @since 0.3.0
 */
export const initial = (policy: Policy): State => ({
  limit: Limit.start(policy.limit),
  circuit: Breaker.initial(policy.breaker)
})

/**
 * The permits the limit gives now (the limit, rounded down).
 *
 * @category getters
 * @since 0.3.0
 */
export const permits = (state: State): number => Math.floor(state.limit.limit)

/**
 * The circuit's word on an attempt at `now`, with the state to commit if the caller goes ahead (see
 * `Breaker.enter`; `early`: it may probe before the window ends).
 *
 * @category transitions
 * @since 0.3.0
 */
export const enter = (state: State, now: number, early = false): readonly [Breaker.Decision, State] => {
  const [decision, circuit] = Breaker.enter(state.circuit, now, early)
  return decision === "shed" ? [decision, state] : [decision, { ...state, circuit }]
}

/**
 * Whether even an early caller would be held back now: the circuit is not closed and its probe is running.
 *
 * @category getters
 * @since 0.3.0
 */
export const blocked = (state: State, now: number): boolean => enter(state, now, true)[0] === "shed"

/**
 * How one attempt ended, for {@link settle}.
 *
 * @category models
 * @since 0.3.0
 */
export interface Attempted {
  readonly outcome: Outcome.Outcome
  /** The attempt was the circuit's probe. */
  readonly probe: boolean
  /** When it ended (ms). */
  readonly now: number
  /** A uniform draw in [0, 1), called only when a window opens (`Breaker.opens`). */
  readonly draw: () => number
}

/**
 * The state after an attempt ended: the circuit learns from it (`Outcome.toBreaker`); the circuit closing (an
 * answer after an outage) ends the limit's hold, so the limit climbs back one answer at a time at once.
 *
 * @category transitions
 * @since 0.3.0
 */
export const settle = (state: State, policy: Policy, attempted: Attempted): State => {
  const circuit = Breaker.settle(state.circuit, policy.breaker, {
    outcome: Outcome.toBreaker(attempted.outcome),
    probe: attempted.probe,
    now: attempted.now,
    draw: attempted.draw
  })
  const closed = state.circuit.phase !== "Closed" && circuit.phase === "Closed"
  return { circuit, limit: closed ? Limit.recovered(state.limit, policy.limit) : state.limit }
}

/**
 * The state after an admitted operation ended: the limit learns from it (`Limit.update`; the draw only when a
 * new hold starts).
 *
 * @category transitions
 * @since 0.3.0
 */
export const learn = (state: State, policy: Policy, learned: Limit.Learned): State => {
  const limit = Limit.update(state.limit, policy.limit, learned)
  return limit === state.limit ? state : { ...state, limit }
}

// ---------------------------------------------------------------------------------------------------------
// Effect: the controller on a Semaphore and a Latch

/**
 * A controller's options: its policy, the `gate` attribute of its metrics and logs, and what its circuit holds
 * back (for the logs).
 *
 * @category models
 * @since 0.3.0
 */
export interface Options {
  readonly policy: Policy
  /** The `gate` attribute of every metric and the `admission.gate` annotation of every log: `request`, `checkout`. */
  readonly gate: string
  /** What the circuit holds back while open, as the logs say it: "requests", "connection attempts". */
  readonly holds: string
}

/**
 * The permit of one admitted operation, which {@link Controller.attempt} gives back while it waits for the
 * circuit and takes again before the attempt.
 *
 * @category models
 * @since 0.3.0
 */
export interface Permit {
  /** Whether the permit is held now (not given back). */
  held(): boolean
  /** Gives the permit back (nothing if it is not held). */
  readonly give: Effect.Effect<void>
  /** Takes the permit again, waiting for one (interruptibly); nothing if it is held. */
  readonly take: Effect.Effect<void>
}

/**
 * How long {@link Controller.admit} waits for a permit: until one is free (interruptibly), or at most `millis`
 * (0: only a free one), then fails with `orElse()`.
 *
 * @category models
 * @since 0.3.0
 */
export type Wait<E> = "untilFree" | { readonly millis: number; readonly orElse: () => E }

/**
 * What {@link Controller.attempt} does when the circuit holds the attempt back: waits for the circuit, giving
 * `waiting` back meanwhile; or fails at once with `orElse(shed)` (`early`: it may probe before the window ends).
 *
 * @category models
 * @since 0.3.0
 */
export type Held<E> =
  | { readonly waiting: Permit }
  | { readonly orElse: (shed: Shed.Shed) => E; readonly early?: boolean | undefined }

/**
 * A running controller.
 *
 * @category models
 * @since 0.3.0
 */
export interface Controller {
  /** The `gate` attribute of its metrics. */
  readonly gate: string
  /**
   * Runs `use` with a permit of the limit (counted in `admission_admitted_total`), or fails as `wait` says when
   * none comes (counted as shed, `QueueTimeout`). The exit, read by `classify` (default `Outcome.ofExit`), teaches
   * the limit. The wait is interruptible; once the permit is taken, its release is guaranteed.
   */
  readonly admit: <A, E, R, E2 = never>(
    use: (permit: Permit) => Effect.Effect<A, E, R>,
    options: {
      readonly wait: Wait<E2>
      readonly classify?: ((exit: Exit.Exit<unknown, unknown>) => Outcome.Outcome) | undefined
    }
  ) => Effect.Effect<A, E | E2, R>
  /**
   * Runs `attempt` if the circuit lets it through (as the probe, when it says so), else as `held` says; the
   * exit, read by `Outcome.ofExit`, teaches the circuit. A caller held back without waiting is counted as shed
   * (`CircuitOpen` or `ProbeInFlight`).
   */
  readonly attempt: <A, E, R, E2 = never>(
    attempt: Effect.Effect<A, E, R>,
    held: Held<E2>
  ) => Effect.Effect<A, E | E2, R>
  /**
   * Evidence that the database answers ({@link Breaker.evidence}): an open circuit lets its next attempt probe at
   * once, and attempts waiting for its window look again. Whether it was open.
   *
   * @since 0.3.0
   */
  readonly evidence: Effect.Effect<boolean>
  /** The state now. */
  readonly state: Effect.Effect<State>
  /** Operations holding a permit now. */
  readonly inFlight: Effect.Effect<number>
}

/** The draw of a jittered schedule: none when its ratio is 0 (the random stream then does not move). */
const drawFor = (ratio: number | undefined, random: Random.Random) => (): number =>
  ratio === undefined || ratio === 0 ? 0 : random.nextDoubleUnsafe()

/** The metrics and the log of one circuit transition (`from` and `to` in different phases). */
const recordTransition = (options: Options, metrics: Metrics.GateMetrics, from: State, to: State, now: number) =>
  Effect.gen(function*() {
    yield* Metric.update(metrics.circuitState, Metrics.circuitStateValue(to.circuit.phase))
    yield* Metric.update(metrics.transition(from.circuit.phase, to.circuit.phase), 1)
    if (to.circuit.phase === "Open") {
      const openMillis = to.circuit.openUntil - now
      yield* Metric.update(metrics.openWindow, openMillis / 1000)
      const log = from.circuit.phase === "Closed"
        ? Effect.logWarning(`database unavailable: ${options.gate} circuit open, holding back ${options.holds}`)
        : Effect.logDebug(`probe failed: ${options.gate} circuit open again, for a longer window`)
      yield* log.pipe(Effect.annotateLogs({
        "admission.open_millis": Math.round(openMillis),
        "admission.failed_probes": to.circuit.failedProbes
      }))
    } else if (to.circuit.phase === "Closed") {
      yield* Metric.update(metrics.openWindow, 0)
      yield* Effect.logInfo(`database answered the probe: ${options.gate} circuit closed`)
    }
  }).pipe(Effect.annotateLogs({ "admission.gate": options.gate }))

/**
 * Builds a controller at rest ({@link initial}); its gauges start at the full limit, nothing in flight and the
 * circuit closed. Its circuit's transitions update `admission_circuit_state`, `admission_circuit_open_seconds` and
 * `admission_circuit_transitions_total` and are logged (WARN when it opens from closed, INFO when it closes).
 *
 * @category constructors
 * @since 0.3.0
 */
export const make = (options: Options): Effect.Effect<Controller> =>
  Effect.gen(function*() {
    const { policy } = options
    const metrics = Metrics.forGate(options.gate)
    let state = initial(policy)
    let inFlight = 0
    const semaphore = yield* Semaphore.make(permits(state))
    /** Open while the circuit is closed; released (waking every waiter to look again) on every other change. */
    const latch = yield* Latch.make(true)
    yield* Metric.update(metrics.limit, permits(state))
    yield* Metric.update(metrics.inFlight, 0)
    yield* Metric.update(metrics.circuitState, 0)
    yield* Metric.update(metrics.openWindow, 0)

    const commit = (next: State, now: number) =>
      Effect.suspend(() => {
        const from = state
        if (next === from) return Effect.void
        state = next
        // The latch follows the circuit in the same step, so no waiter sees one without the other.
        let wake: Effect.Effect<unknown> = Effect.void
        if (next.circuit !== from.circuit) {
          if (next.circuit.phase === "Closed") latch.openUnsafe()
          else {
            latch.closeUnsafe()
            wake = latch.release
          }
        }
        const resize = permits(next) === permits(from) ? Effect.void : Effect.andThen(
          semaphore.resize(permits(next)),
          Metric.update(metrics.limit, permits(next))
        )
        if (next.circuit.phase !== from.circuit.phase) {
          return Effect.andThen(Effect.andThen(resize, wake), recordTransition(options, metrics, from, next, now))
        }
        return resize === Effect.void ? wake : Effect.andThen(resize, wake)
      })

    const shed = (reason: Shed.Reason) =>
      Effect.andThen(
        Metric.update(metrics.shed(reason), 1),
        Effect.annotateCurrentSpan({ "admission.shed": true, "admission.shed.reason": reason })
      )

    const count = (delta: number) =>
      Effect.suspend(() => {
        inFlight += delta
        return Metric.update(metrics.inFlight, inFlight)
      })

    /** Gives one held permit back, with its count in flight. */
    const giveBack = Effect.suspend(() => Effect.andThen(count(-1), semaphore.release(1)))

    /**
     * Takes a permit within `millis` (0: only a free one; infinite: until one is free), counted in flight; the
     * release of what it took, or `undefined` when none came. Run it uninterruptibly: only the wait is made
     * interruptible, with the caller's `restore` (as `Semaphore.takeScoped` does), and it goes through a scope of its
     * own, so an interruption at any point gives back exactly what was taken and the caller keeps what it returns.
     */
    type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
    const takePermit = (millis: number, restore: Restore): Effect.Effect<Effect.Effect<void> | undefined> =>
      Effect.flatMap(semaphore.takeIfAvailable(1), (free) =>
        free
          ? Effect.as(count(1), giveBack)
          : millis === 0
          ? Effect.undefined
          : waitForPermit(millis, restore))

    /** {@link takePermit} when none is free: the wait, through a scope of its own. */
    const waitForPermit = (millis: number, restore: Restore): Effect.Effect<Effect.Effect<void> | undefined> =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const acquire = Scope.provide(semaphore.takeScoped(1), scope)
        const taken = yield* restore(
          Number.isFinite(millis)
            ? Effect.map(Effect.timeoutOption(acquire, millis), Option.isSome)
            : Effect.as(acquire, true)
        ).pipe(Effect.onInterrupt(() => Scope.close(scope, Exit.void)))
        if (!taken) return undefined
        yield* count(1)
        return Effect.andThen(count(-1), Scope.close(scope, Exit.void))
      })

    /** The permit of one admitted operation: given back and taken again by a waiting attempt, released at the end. */
    class Hold implements Permit {
      release: Effect.Effect<void> | undefined
      constructor(release: Effect.Effect<void>) {
        this.release = release
      }
      held(): boolean {
        return this.release !== undefined
      }
      get give(): Effect.Effect<void> {
        return Effect.sync(() => {
          const releasing = this.release
          this.release = undefined
          return releasing
        }).pipe(Effect.flatMap((releasing) => releasing ?? Effect.void))
      }
      get take(): Effect.Effect<void> {
        return Effect.uninterruptibleMask((restore) =>
          Effect.suspend(() =>
            this.release !== undefined
              ? Effect.void
              : Effect.map(takePermit(Number.POSITIVE_INFINITY, restore), (release) => {
                this.release = release
              })
          )
        )
      }
    }

    const admit = <A, E, R, E2 = never>(
      use: (permit: Permit) => Effect.Effect<A, E, R>,
      admitOptions: {
        readonly wait: Wait<E2>
        readonly classify?: ((exit: Exit.Exit<unknown, unknown>) => Outcome.Outcome) | undefined
      }
    ): Effect.Effect<A, E | E2, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const { wait } = admitOptions
          const taken = yield* takePermit(wait === "untilFree" ? Number.POSITIVE_INFINITY : wait.millis, restore)
          if (taken === undefined) {
            yield* shed("QueueTimeout")
            return yield* Effect.fail((wait as Exclude<Wait<E2>, "untilFree">).orElse())
          }
          const permit = new Hold(taken)
          yield* Metric.update(metrics.admitted, 1)
          const atStart = inFlight
          const startedAt = yield* Clock.currentTimeMillis
          const exit = yield* Effect.exit(restore(use(permit)))
          const now = yield* Clock.currentTimeMillis
          const random = yield* Random.Random
          const outcome = (admitOptions.classify ?? Outcome.ofExit)(exit)
          yield* permit.give
          yield* commit(
            learn(state, policy, {
              sample: { outcome, inFlight: atStart, millis: now - startedAt },
              now,
              draw: drawFor(policy.limit.hold?.ratio, random)
            }),
            now
          )
          return yield* exit
        })
      )

    const attempt = <A, E, R, E2 = never>(
      effect: Effect.Effect<A, E, R>,
      held: Held<E2>
    ): Effect.Effect<A, E | E2, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const early = "orElse" in held && held.early === true
          while (true) {
            const now = yield* Clock.currentTimeMillis
            const [decision, next] = enter(state, now, early)
            if (decision !== "shed") {
              if ("waiting" in held && !held.waiting.held()) {
                // Within the limit again before the attempt; then ask the circuit once more.
                yield* restore(held.waiting.take)
                continue
              }
              yield* commit(next, now)
              const exit = yield* Effect.exit(restore(effect))
              const ended = yield* Clock.currentTimeMillis
              const random = yield* Random.Random
              yield* commit(
                settle(state, policy, {
                  outcome: Outcome.ofExit(exit),
                  probe: decision === "probe",
                  now: ended,
                  draw: drawFor(policy.breaker.windows.ratio, random)
                }),
                ended
              )
              return yield* exit
            }
            const retryAfterMillis = Breaker.retryAfterMillis(state.circuit, now)
            if ("orElse" in held) {
              const error = state.circuit.phase === "Open"
                ? new Shed.Shed({ reason: "CircuitOpen", retryAfterMillis })
                : new Shed.Shed({ reason: "ProbeInFlight" })
              yield* shed(error.reason)
              return yield* Effect.fail(held.orElse(error))
            }
            yield* held.waiting.give
            yield* restore(
              retryAfterMillis > 0 ? Effect.raceFirst(Effect.sleep(retryAfterMillis), latch.await) : latch.await
            )
          }
        })
      )

    const evidence = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.suspend(() => {
        const circuit = Breaker.evidence(state.circuit)
        return circuit === state.circuit ? Effect.succeed(false) : Effect.as(commit({ ...state, circuit }, now), true)
      }))

    return {
      gate: options.gate,
      admit,
      attempt,
      evidence,
      state: Effect.sync(() => state),
      inFlight: Effect.sync(() => inFlight)
    } satisfies Controller
  })
