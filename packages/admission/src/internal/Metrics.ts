/**
 * The admission metrics, as Effect `Metric`s, the same for every gate that {@link Controller} drives, told apart
 * by their `gate` attribute (`request`: the API's gate, served on its `/metrics`; `checkout`: the deriver's, on
 * its own): what it admitted and shed, the current limit, the operations holding a permit, and the circuit's state.
 *
 * @since 0.1.0
 */
import { Metric } from "effect"
import type * as Breaker from "../Breaker.ts"
import type * as Shed from "../Shed.ts"

/** A counter that only counts up (`incremental`), as every counter here does. */
const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/**
 * Operations admitted (given a permit of the limit), by `gate`: the API's requests, the deriver's checkouts.
 *
 * @category metrics
 * @since 0.1.0
 */
export const admitted = counter(
  "admission_admitted_total",
  "Operations admitted (given a permit of the adaptive limit), by gate: request (API), checkout (deriver)"
)

/**
 * Operations shed, by `gate` and `reason` (`QueueTimeout`: no permit within the bound, for the deriver at once;
 * `CircuitOpen`, `ProbeInFlight`: the circuit held it back); none made a connection attempt. A deriver's
 * checkout that waits for the circuit's window is not shed.
 *
 * @category metrics
 * @since 0.1.0
 */
export const shed = counter(
  "admission_shed_total",
  "Operations shed by an admission gate, without a connection attempt, by gate and reason"
)

/**
 * The counter series for one gate and reason.
 *
 * @category metrics
 * @since 0.1.0
 */
export const shedFor = (gate: string, reason: Shed.Reason) => Metric.withAttributes(shed, { gate, reason })

/**
 * The current concurrency limit, by `gate`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const limit = Metric.gauge("admission_concurrency_limit", {
  description: "Current adaptive concurrency limit of an admission gate, by gate"
})

/**
 * Operations holding a permit now, by `gate`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const inFlight = Metric.gauge("admission_in_flight", {
  description: "Operations holding a permit of an admission gate now, by gate"
})

/**
 * The circuit, by `gate`: 0 closed, 1 half-open (a probe may run), 2 open (holding everything back).
 *
 * @category metrics
 * @since 0.1.0
 */
export const circuitState = Metric.gauge("admission_circuit_state", {
  description: "Admission circuit state, by gate: 0 closed, 1 half-open, 2 open"
})

/**
 * The gauge value of a circuit state.
 *
 * @category metrics
 * @since 0.1.0
 */
export const circuitStateValue = (state: Breaker.Phase): number => state === "Closed" ? 0 : state === "HalfOpen" ? 1 : 2

/**
 * Circuit transitions, by `gate`, `from` and `to`.
 *
 * @category metrics
 * @since 0.1.0
 */
export const circuitTransitions = counter(
  "admission_circuit_transitions_total",
  "Admission circuit transitions, by gate, from and to state"
)

/**
 * The length of the current open window, in seconds (0 while closed), by `gate`: 1 → 2 → 4 → … → the cap
 * across consecutive failed probes, jittered.
 *
 * @category metrics
 * @since 0.2.0
 */
export const openWindow = Metric.gauge("admission_circuit_open_seconds", {
  description: "Length of an admission circuit's current open window, in seconds (0 while closed), by gate"
})

/**
 * The series of one gate, each metric with its `gate` attribute (built once per gate, not per update).
 *
 * @category metrics
 * @since 0.3.0
 */
export const forGate = (gate: string) => {
  const attributes = { gate }
  return {
    admitted: Metric.withAttributes(admitted, attributes),
    limit: Metric.withAttributes(limit, attributes),
    inFlight: Metric.withAttributes(inFlight, attributes),
    circuitState: Metric.withAttributes(circuitState, attributes),
    openWindow: Metric.withAttributes(openWindow, attributes),
    shed: (reason: Shed.Reason) => shedFor(gate, reason),
    transition: (from: Breaker.Phase, to: Breaker.Phase) =>
      Metric.withAttributes(circuitTransitions, { gate, from, to })
  }
}

/**
 * The series of one gate ({@link forGate}).
 *
 * @category metrics
 * @since 0.3.0
 */
export type GateMetrics = ReturnType<typeof forGate>
