/**
 * The circuit of the admission gate: {@link Breaker}'s pure state machine, driven by Effect's `Clock` and
 * `Random`. When `tripFailures` of the last `2 × tripFailures` outcomes were unavailable it opens for a jittered
 * window, during which every request is shed; then the next request is the one probe (others are shed while it
 * runs); an answer closes the circuit, another unavailability opens the next window, twice as long up to
 * `openMaxMillis`, so a long outage costs one probe per capped window.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Metric, Random } from "effect"
import * as Breaker from "./Breaker.ts"
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
  readonly state: Effect.Effect<Breaker.Phase>
}

/**
 * The breaker policy of the settings: trip on `tripFailures`; windows `openMillis` × 2 per failed probe, capped at
 * `openMaxMillis`, jittered by `openJitterRatio`.
 *
 * @since 0.2.0
 */
export const policy = (settings: Settings.Settings): Breaker.Policy => ({
  tripFailures: settings.tripFailures,
  windows: {
    baseMillis: settings.openMillis,
    multiplier: 2,
    maxMillis: Math.max(settings.openMillis, settings.openMaxMillis),
    enabled: true,
    ratio: settings.openJitterRatio
  }
})

const recordTransition = (from: Breaker.State, to: Breaker.State, now: number) =>
  Effect.gen(function*() {
    if (from.phase === to.phase) return
    yield* Metric.update(Metrics.circuitState, Metrics.circuitStateValue(to.phase))
    yield* Metric.update(Metric.withAttributes(Metrics.circuitTransitions, { from: from.phase, to: to.phase }), 1)
    if (to.phase === "Open") {
      const openMillis = to.openUntil - now
      yield* Metric.update(Metrics.openWindow, openMillis / 1000)
      const log = from.phase === "Closed"
        ? Effect.logWarning("database unavailable: admission circuit open, shedding requests")
        : Effect.logDebug("probe failed: admission circuit open again, for a longer window")
      yield* log.pipe(
        Effect.annotateLogs({
          "admission.open_millis": Math.round(openMillis),
          "admission.failed_probes": to.failedProbes
        })
      )
    } else if (to.phase === "Closed") {
      yield* Metric.update(Metrics.openWindow, 0)
      yield* Effect.logInfo("database answered the probe: admission circuit closed")
    }
  })

/**
 * Builds the circuit; its transitions update {@link Metrics.circuitState} and {@link Metrics.openWindow} and are
 * logged (WARN when it opens from closed, INFO when it closes).
 *
 * @since 0.1.0
 */
export const make = (settings: Settings.Settings): Effect.Effect<Circuit> =>
  Effect.gen(function*() {
    const rules = policy(settings)
    let state = Breaker.initial(rules)
    yield* Metric.update(Metrics.circuitState, 0)
    yield* Metric.update(Metrics.openWindow, 0)

    const commit = (next: Breaker.State, now: number) =>
      Effect.suspend(() => {
        const from = state
        state = next
        return recordTransition(from, next, now)
      })

    const settle = (outcome: Breaker.Outcome, probe: boolean) =>
      Effect.gen(function*() {
        const u = rules.windows.ratio > 0 && Breaker.opens(state, rules, outcome, probe) ? yield* Random.next : 0
        const now = yield* Clock.currentTimeMillis
        yield* commit(Breaker.settle(state, rules, { outcome, probe, now, draw: () => u }), now)
      })

    const execute = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const [decision, entered] = Breaker.enter(state, now)
          if (decision === "shed") {
            return yield* (state.phase === "Open"
              ? new Shed.Shed({ reason: "CircuitOpen", retryAfterMillis: Breaker.retryAfterMillis(state, now) })
              : new Shed.Shed({ reason: "ProbeInFlight" }))
          }
          yield* commit(entered, now)
          const exit = yield* Effect.exit(restore(effect))
          yield* settle(Outcome.toBreaker(Outcome.ofExit(exit)), decision === "probe")
          return yield* exit
        })
      )

    return { execute, state: Effect.sync(() => state.phase) } satisfies Circuit
  })
