/**
 * The short circuit after unavailability, on Effect's `CircuitBreaker` (`effect/persistence`, in-memory
 * store, one key): when at least half of the last `2 × tripFailures` outcomes (and at least `tripFailures`) were
 * unavailable it opens for a jittered window, during
 * which every request is shed; then the next request is the one probe (others are shed while it runs); an
 * answer closes the circuit, another unavailability opens a new window.
 *
 * @since 0.1.0
 */
import { Jitter } from "@resilience/jitter"
import { Duration, Effect, Metric, Schedule, type Scope, Stream } from "effect"
import { CircuitBreaker } from "effect/persistence"
import * as Metrics from "./Metrics.ts"
import * as Outcome from "./Outcome.ts"
import type * as Settings from "./Settings.ts"
import * as Shed from "./Shed.ts"

/**
 * The circuit of one gate.
 *
 * @since 0.1.0
 */
export interface Circuit {
  /** Runs `effect` if the circuit lets it through, and records what its exit says about the database. */
  readonly execute: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | Shed.Shed, R>
  /** The state now. An open circuit past its window reads `Open` until the next request becomes the probe. */
  readonly state: Effect.Effect<"Closed" | "HalfOpen" | "Open">
}

/**
 * The open windows: every opening lasts `openMillis` with ratio jitter (`@resilience/jitter`), drawn from
 * Effect's `Random`, so instances that saw the same outage do not probe in step.
 *
 * @since 0.1.0
 */
export const openWindows = (settings: Settings.Settings): Schedule.Schedule<Duration.Duration> =>
  Schedule.fromStep(Effect.succeed(() =>
    Effect.map(
      Jitter.jitter(Duration.millis(settings.openMillis), settings.openJitterRatio),
      (window) => [window, window] as [Duration.Duration, Duration.Duration]
    )
  ))

const key = "database"

const toBreakerOutcome = (outcome: Outcome.Outcome): CircuitBreaker.Outcome => {
  switch (outcome) {
    case "Unavailable":
      return CircuitBreaker.failure()
    case "Ignored":
      return CircuitBreaker.ignored
    case "Answered":
    case "Overloaded":
      return CircuitBreaker.success
  }
}

const shedReason = (error: CircuitBreaker.CircuitBreakerError): Shed.Reason | undefined => {
  switch (error.reason._tag) {
    case "CircuitOpen":
      return "CircuitOpen"
    case "CircuitHalfOpen":
      return "ProbeInFlight"
    default:
      return undefined
  }
}

const recordTransition = (transition: CircuitBreaker.Transition) =>
  Effect.gen(function*() {
    yield* Metric.update(Metrics.circuitState, Metrics.circuitStateValue(transition.to))
    yield* Metric.update(
      Metric.withAttributes(Metrics.circuitTransitions, { from: transition.from, to: transition.to }),
      1
    )
    if (transition.to === "Open" && transition.from === "Closed") {
      yield* Effect.logWarning("database unavailable: admission circuit open, shedding requests").pipe(
        Effect.annotateLogs({ "admission.open_millis": Duration.toMillis(transition.retryAfter) })
      )
    } else if (transition.to === "Closed") {
      yield* Effect.logInfo("database answered the probe: admission circuit closed")
    }
  })

/**
 * Builds the circuit; its transitions update {@link Metrics.circuitState} and are logged (WARN when it opens
 * from closed, INFO when it closes) for as long as the scope lives.
 *
 * @since 0.1.0
 */
export const make = (settings: Settings.Settings): Effect.Effect<Circuit, never, Scope.Scope> =>
  Effect.gen(function*() {
    const breaker = yield* CircuitBreaker.make({
      tripPolicy: CircuitBreaker.rate({
        threshold: 0.5,
        size: 2 * settings.tripFailures,
        minimumCalls: settings.tripFailures
      }),
      openDuration: openWindows(settings)
    }).pipe(Effect.provide(CircuitBreaker.layerStoreMemory()))
    yield* Metric.update(Metrics.circuitState, 0)
    yield* breaker.transitions.pipe(
      Stream.runForEach(recordTransition),
      Effect.forkScoped({ startImmediately: true })
    )

    const execute = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R> =>
      breaker.execute(effect, {
        key,
        classify: (exit) => toBreakerOutcome(Outcome.ofExit(exit))
      }).pipe(
        Effect.catchIf(
          (error): error is CircuitBreaker.CircuitBreakerError => error instanceof CircuitBreaker.CircuitBreakerError,
          (error) => {
            const reason = shedReason(error)
            // The in-memory store never fails; a store error would be a defect of this package.
            if (reason === undefined) return Effect.die(error)
            return Effect.fail(
              error.reason._tag === "CircuitOpen"
                ? new Shed.Shed({ reason, retryAfterMillis: Duration.toMillis(error.reason.retryAfter) })
                : new Shed.Shed({ reason })
            )
          }
        )
      ) as Effect.Effect<A, E | Shed.Shed, R>

    const state = breaker.state(key).pipe(
      Effect.map((state) => state._tag),
      Effect.orElseSucceed(() => "Closed" as const)
    )
    return { execute, state } satisfies Circuit
  })
