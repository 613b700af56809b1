/**
 * The admission gate: one per process, in front of the database work of every request. A request passes the
 * circuit (shed while it is open, or while the one probe runs), then waits at most `queueTimeoutMillis` for a
 * permit of the adaptive limit (shed when none comes), then runs. A shed request makes no connection
 * attempt; an admitted one makes whatever its effect makes (with `DbSession.oneCheckout`: at most one).
 *
 * @since 0.1.0
 */
import { Clock, type Config, Context, Effect, Layer, Metric, Option, type Scope, Semaphore } from "effect"
import * as Circuit from "./Circuit.ts"
import * as Limit from "./Limit.ts"
import * as Metrics from "./Metrics.ts"
import * as Outcome from "./Outcome.ts"
import * as Settings from "./Settings.ts"
import * as Shed from "./Shed.ts"

/**
 * The gate as a service.
 *
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
 * @since 0.1.0
 */
export interface Snapshot {
  readonly enabled: boolean
  readonly limit: number
  readonly inFlight: number
  readonly circuit: "Closed" | "HalfOpen" | "Open"
}

const shed = (error: Shed.Shed) =>
  Effect.gen(function*() {
    yield* Metric.update(Metrics.shedFor(error.reason), 1)
    yield* Effect.annotateCurrentSpan({ "admission.shed": true, "admission.shed.reason": error.reason })
    return yield* error
  })

/**
 * A gate that admits everything (`enabled: false`): the behaviour without the gate.
 *
 * @since 0.1.0
 */
export const disabled: Gate["Service"] = Gate.of({
  run: (effect) => effect,
  snapshot: Effect.succeed({ enabled: false, limit: Number.POSITIVE_INFINITY, inFlight: 0, circuit: "Closed" })
})

/**
 * Builds a gate with validated settings; its circuit's bookkeeping lives as long as the scope.
 *
 * @since 0.1.0
 */
export const make = (settings: Settings.Settings): Effect.Effect<Gate["Service"], never, Scope.Scope> =>
  Effect.gen(function*() {
    if (!settings.enabled) return disabled
    let limit = Limit.initial(settings)
    let inFlight = 0
    const permits = yield* Semaphore.make(limit)
    const circuit = yield* Circuit.make(settings)
    yield* Metric.update(Metrics.limit, limit)
    yield* Metric.update(Metrics.inFlight, 0)

    /** A permit for the rest of the scope, or `false` when none came within the queueing bound. */
    const acquire: Effect.Effect<boolean, never, Scope.Scope> = Effect.uninterruptible(
      Effect.flatMap(permits.takeIfAvailable(1), (taken) =>
        taken
          ? Effect.as(Effect.addFinalizer(() => permits.release(1)), true)
          : settings.queueTimeoutMillis === 0
          ? Effect.succeed(false)
          : Effect.interruptible(
            Effect.map(
              Effect.timeoutOption(permits.takeScoped(1), settings.queueTimeoutMillis),
              Option.isSome
            )
          ))
    )

    const learn = (sample: Limit.Sample) =>
      Effect.suspend(() => {
        const next = Limit.next(limit, sample, settings)
        if (next === limit) return Effect.void
        limit = next
        return Effect.andThen(permits.resize(next), Metric.update(Metrics.limit, next))
      })

    const enter = Effect.sync(() => ++inFlight).pipe(
      Effect.tap((n) => Metric.update(Metrics.inFlight, n))
    )
    const leave = Effect.sync(() => --inFlight).pipe(
      Effect.flatMap((n) => Metric.update(Metrics.inFlight, n))
    )

    const admitted = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R> =>
      Effect.scoped(Effect.gen(function*() {
        if (!(yield* acquire)) return yield* shed(new Shed.Shed({ reason: "QueueTimeout" }))
        yield* Metric.update(Metrics.admitted, 1)
        const atStart = yield* Effect.acquireRelease(enter, () => leave)
        const startedAt = yield* Clock.currentTimeMillis
        const exit = yield* Effect.exit(effect)
        const millis = (yield* Clock.currentTimeMillis) - startedAt
        yield* learn({ outcome: Outcome.ofExit(exit), inFlight: atStart, millis })
        return yield* exit
      }))

    const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R> =>
      circuit.execute(admitted(effect)).pipe(
        Effect.catchIf(
          (error): error is Shed.Shed => Shed.isShed(error) && error.reason !== "QueueTimeout",
          shed
        )
      ) as Effect.Effect<A, E | Shed.Shed, R>

    const snapshot = Effect.map(circuit.state, (state): Snapshot => ({
      enabled: true,
      limit,
      inFlight,
      circuit: state
    }))

    return Gate.of({ run, snapshot })
  })

/**
 * The gate from explicit options (validated; an invalid option is a defect naming it: validate configuration
 * up front with {@link Settings.make}).
 *
 * @since 0.1.0
 */
export const layer = (options: Settings.Options = {}): Layer.Layer<Gate> =>
  Layer.effect(Gate, Effect.flatMap(Effect.orDie(Settings.make(options)), make))

/**
 * The gate from the environment variables `names` gives ({@link Settings.config}).
 *
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
 * @since 0.1.0
 */
export const run = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Shed.Shed, R | Gate> =>
  Effect.flatMap(Effect.service(Gate), (gate) => gate.run(effect))
