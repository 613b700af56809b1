/**
 * The admission gate: one per process, in front of the database work of every request. A request passes the
 * circuit (shed while it is open, or while the one probe runs), then waits at most `queueTimeoutMillis` for a
 * permit of the adaptive limit (shed when none comes), then runs. A shed request makes no connection
 * attempt; an admitted one makes whatever its effect makes (with `DbSession.oneCheckout`: at most one).
 *
 * It is the {@link Controller} with the API's policy and `gate="request"`: the deriver's checkout gate drives the
 * same controller, with the same metrics and logs.
 *
 * @since 0.1.0
 */
import { type Config, Context, Effect, Layer } from "effect"
import type * as Breaker from "./Breaker.ts"
import * as Controller from "./Controller.ts"
import * as Settings from "./Settings.ts"
import * as Shed from "./Shed.ts"

/**
 * The gate as a service.
 *
 * @category services
 * @since 0.1.0
 */
export class Gate extends Context.Service<Gate, {
  /** Runs `effect` if admitted; otherwise fails with {@link Shed.Shed} without running it. */
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | Shed.Shed, R>
  /** The current limit, the requests holding a permit, and the circuit's state. */
  readonly snapshot: Effect.Effect<Snapshot>
}>()("@resilience/admission/Gate") {}

/**
 * What a gate is doing now.
 *
 * @category models
 * @since 0.1.0
 */
export interface Snapshot {
  readonly enabled: boolean
  readonly limit: number
  readonly inFlight: number
  readonly circuit: Breaker.Phase
}

/**
 * A gate that admits everything (`enabled: false`): the behaviour without the gate.
 *
 * @category constructors
 * @since 0.1.0
 */
export const disabled: Gate["Service"] = Gate.of({
  run: (effect) => effect,
  snapshot: Effect.succeed({ enabled: false, limit: Number.POSITIVE_INFINITY, inFlight: 0, circuit: "Closed" })
})

/**
 * Builds a gate with validated settings: a {@link Controller} with the settings' policy
 * ({@link Settings.policy}) and `gate="request"`, asking the circuit per request (shed while it is open, or
 * while the probe runs), then waiting at most `queueTimeoutMillis` for a permit.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (settings: Settings.Settings): Effect.Effect<Gate["Service"]> =>
  Effect.gen(function*() {
    if (!settings.enabled) return disabled
    const controller = yield* Controller.make({
      policy: Settings.policy(settings),
      gate: "request",
      holds: "requests"
    })
    const wait: Controller.Wait<Shed.Shed> = {
      millis: settings.queueTimeoutMillis,
      orElse: () => new Shed.Shed({ reason: "QueueTimeout" })
    }
    const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R> =>
      controller.attempt(controller.admit(() => effect, { wait }), { orElse: (shed) => shed })

    const snapshot = Effect.gen(function*() {
      const state = yield* controller.state
      return {
        enabled: true,
        limit: Controller.permits(state),
        inFlight: yield* controller.inFlight,
        circuit: state.circuit.phase
      } satisfies Snapshot
    })

    return Gate.of({ run, snapshot })
  })

/**
 * The gate from explicit options (validated; an invalid option is a defect naming it: validate configuration
 * up front with {@link Settings.make}).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: Settings.Options = {}): Layer.Layer<Gate> =>
  Layer.effect(Gate, Effect.flatMap(Effect.orDie(Settings.make(options)), make))

/**
 * The gate from the environment variables `names` gives ({@link Settings.config}).
 *
 * @category layers
 * @since 0.2.0
 */
export const layerConfig = (names: Settings.Names): Layer.Layer<Gate, Config.ConfigError> =>
  Layer.effect(
    Gate,
    Effect.gen(function*() {
      return yield* make(yield* Settings.config(names))
    })
  )

/**
 * Runs `effect` through the {@link Gate} in context.
 *
 * @category combinators
 * @since 0.1.0
 */
export const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R | Gate> =>
  Effect.flatMap(Effect.service(Gate), (gate) => gate.run(effect))
