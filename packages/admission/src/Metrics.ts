/**
 * The gate's metrics, as Effect `Metric`s (served by the API's `/metrics`): what it admitted and shed, the
 * current limit, the requests holding a permit, and the circuit's state.
 *
 * @since 0.1.0
 */
import { Metric } from "effect"
import type * as Shed from "./Shed.ts"

/** A counter that only counts up (`incremental`), as every counter here does. */
const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/**
 * Requests admitted (given a permit; each then makes at most one connection attempt).
 *
 * @since 0.1.0
 */
export const admitted = counter("admission_admitted_total", "Requests admitted by the admission gate")

/**
 * Requests shed, by `reason` (`QueueTimeout`, `CircuitOpen`, `ProbeInFlight`); none made a connection attempt.
 *
 * @since 0.1.0
 */
export const shed = counter(
  "admission_shed_total",
  "Requests shed by the admission gate, without a connection attempt, by reason"
)

/**
 * The counter series for one reason.
 *
 * @since 0.1.0
 */
export const shedFor = (reason: Shed.Reason) => Metric.withAttributes(shed, { reason })

/**
 * The current concurrency limit.
 *
 * @since 0.1.0
 */
export const limit = Metric.gauge("admission_concurrency_limit", {
  description: "Current adaptive concurrency limit of the admission gate"
})

/**
 * Requests holding a permit now.
 *
 * @since 0.1.0
 */
export const inFlight = Metric.gauge("admission_in_flight", {
  description: "Requests admitted and not yet finished"
})

/**
 * The circuit: 0 closed, 1 half-open (a probe may run), 2 open (shedding everything).
 *
 * @since 0.1.0
 */
export const circuitState = Metric.gauge("admission_circuit_state", {
  description: "Admission circuit state: 0 closed, 1 half-open, 2 open"
})

/**
 * The gauge value of a circuit state.
 *
 * @since 0.1.0
 */
export const circuitStateValue = (state: "Closed" | "HalfOpen" | "Open"): number =>
  state === "Closed" ? 0 : state === "HalfOpen" ? 1 : 2

/**
 * Circuit transitions, by `from` and `to`.
 *
 * @since 0.1.0
 */
export const circuitTransitions = counter(
  "admission_circuit_transitions_total",
  "Admission circuit transitions, by from and to state"
)

/**
 * The length of the current open window, in seconds (0 while closed): 1 → 2 → 4 → … → the cap across
 * consecutive failed probes, jittered.
 *
 * @since 0.2.0
 */
export const openWindow = Metric.gauge("admission_circuit_open_seconds", {
  description: "Length of the admission circuit's current open window, in seconds (0 while closed)"
})
