/**
 * The API's admission gate of one instance, in simulated time: the circuit (shed while open; after the
 * jittered window one probe, others shed while it runs; an answer closes it, an unavailability opens a new
 * window) and the adaptive concurrency limit, whose arithmetic is the admission package's own
 * ({@link Limit.next}). The simulation keeps the requests waiting for a permit and asks the gate what to do.
 *
 * @since 0.2.0
 */
import { Limit, type Settings as AdmissionSettings } from "@resilience/admission"
import { Jitter } from "@resilience/jitter"
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

type Circuit = "Closed" | "Open" | "HalfOpen"

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
  private circuit: Circuit = "Closed"
  private failures = 0
  private openUntil = 0
  private probing = false
  private readonly draw: () => number

  constructor(settings: Settings, draw: () => number) {
    this.settings = settings
    this.limit = Limit.initial(settings)
    this.draw = draw
  }

  /** The circuit's answer to a request arriving at `t`. */
  enter(t: number): Entry {
    switch (this.circuit) {
      case "Closed":
        return "pass"
      case "Open":
        if (t < this.openUntil) return "shed"
        this.circuit = "HalfOpen"
        this.probing = true
        return "probe"
      case "HalfOpen":
        if (this.probing) return "shed"
        this.probing = true
        return "probe"
    }
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
    this.probing = false
  }

  /** An admitted request finished at `t`: the limit and the circuit learn from it. */
  finish(t: number, outcome: Outcome, inFlight: number, millis: number, probe: boolean): void {
    this.inFlight--
    this.limit = Limit.next(this.limit, { outcome, inFlight, millis }, this.settings)
    if (outcome === "Answered") {
      this.failures = 0
      if (probe) {
        this.circuit = "Closed"
        this.probing = false
      }
      return
    }
    this.failures++
    if (probe || (this.circuit === "Closed" && this.failures >= this.settings.tripFailures)) this.open(t)
  }

  /** Whether the circuit is open or half-open now. */
  isOpen(): boolean {
    return this.circuit !== "Closed"
  }

  private open(t: number): void {
    this.circuit = "Open"
    this.probing = false
    this.openUntil = t + Jitter.jitterFrom(this.settings.openMillis, this.settings.openJitterRatio, this.draw())
  }
}
