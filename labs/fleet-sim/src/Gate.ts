/**
 * The API's admission gate of one instance, in simulated time: the circuit and the adaptive concurrency limit,
 * both the admission package's own pure state machines ({@link Breaker}, {@link Limit}): the same trip rule,
 * the same one probe, the same open windows backing off 1 → 2 → 4 → … → `openMaxMillis` across failed probes,
 * the same AIMD arithmetic. The simulation keeps the requests waiting for a permit and asks the gate what to do.
 *
 * @since 0.2.0
 */
import { Breaker, Limit, Settings as AdmissionSettings } from "@resilience/admission"
import { IntQueue } from "./IntQueue.ts"

/**
 * The gate's settings (the admission package's, read from `API_ADMISSION_*`).
 *
 * @since 0.2.0
 */
export type Settings = AdmissionSettings.Settings

/**
 * What the circuit says to an arriving request.
 *
 * @since 0.2.0
 */
export type Entry = "pass" | "probe" | "shed"

/**
 * What an admitted request says about the database.
 *
 * @since 0.2.0
 */
export type Outcome = "Answered" | "Unavailable"

/**
 * One instance's gate.
 *
 * @since 0.2.0
 */
export class Gate {
  readonly settings: Settings
  /** The concurrency limit now. */
  limit: number
  /** Admitted requests not yet finished. */
  inFlight = 0
  /** Requests waiting for a permit: `(client, generation)`. */
  readonly waiting = new IntQueue(64)
  private readonly policy: Breaker.Policy
  private circuit: Breaker.State
  private readonly draw: () => number

  constructor(settings: Settings, draw: () => number) {
    this.settings = settings
    this.limit = Limit.initial(settings)
    this.policy = AdmissionSettings.policy(settings).breaker
    this.circuit = Breaker.initial(this.policy)
    this.draw = draw
  }

  /** The circuit's answer to a request arriving at `t`. */
  enter(t: number): Entry {
    const [decision, next] = Breaker.enter(this.circuit, t)
    this.circuit = next
    return decision
  }

  /** Whether a permit is free. */
  hasPermit(): boolean {
    return this.inFlight < this.limit
  }

  /** Takes a permit; returns the requests in flight with it (itself included). */
  admit(): number {
    return ++this.inFlight
  }

  /** The probe was shed before it ran (no permit in time): the next request probes instead. */
  probeShed(): void {
    this.circuit = Breaker.abandon(this.circuit)
  }

  /** An admitted request finished at `t`: the limit and the circuit learn from it. */
  finish(t: number, outcome: Outcome, inFlight: number, millis: number, probe: boolean): void {
    this.inFlight--
    this.limit = Limit.next(this.limit, { outcome, inFlight, millis }, this.settings)
    // The draw is taken only when a window opens (the simulation's random stream moves as it did before).
    this.circuit = Breaker.settle(this.circuit, this.policy, { outcome, probe, now: t, draw: this.draw })
  }

  /** Whether the circuit is open or half-open now. */
  isOpen(): boolean {
    return this.circuit.phase !== "Closed"
  }
}
