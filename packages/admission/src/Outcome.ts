/**
 * What one admitted request says about the database: the signal the limit and the circuit learn from.
 *
 * @since 0.1.0
 */
import { Classify } from "@resilience/db-session"
import { Cause, Exit } from "effect"
import type * as Breaker from "./Breaker.ts"
import * as Shed from "./Shed.ts"

/**
 * - `Unavailable`: a checkout failed because the database or its pooler cannot serve now (what
 *   `@resilience/db-session`'s table calls `unavailable`): the limit decreases and it counts towards opening
 *   the circuit.
 * - `Overloaded`: the database answered, but is struggling: a statement ran out of time or the server ran out
 *   of a resource (the table's transient `StatementTimeout`, `ResourceExhausted`, `ServerInterrupted`), or an
 *   admitted request took longer than `slowMillis`: the limit decreases; the circuit is not affected.
 * - `Exhausted`: the checkout waited in vain for a slot of this process's own in-process pool
 *   (`POOL_EXHAUSTED`, db-session's `Classify.isPoolExhausted`): local overload, not evidence about the database
 *   (no connection attempt was made): the limit decreases; the circuit is not affected.
 * - `Answered`: the database answered (the request may still have failed for its own reasons: a 404, a
 *   constraint, a deadlock, a read-only server after a failover): the limit may increase and a half-open
 *   circuit closes.
 * - `Ignored`: nothing learned (interrupted, shed before it ran, a misconfigured database that no waiting fixes).
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome = "Unavailable" | "Overloaded" | "Exhausted" | "Answered" | "Ignored"

/** Transient rows of db-session's table (typed by its row names) that mean the server is short of time or resources. */
const overloadConditions: ReadonlySet<Classify.Condition["name"]> = new Set<Classify.RowName>([
  "StatementTimeout",
  "ResourceExhausted",
  "ServerInterrupted"
])

const rank: Record<Outcome, number> = { Answered: 0, Ignored: 1, Exhausted: 2, Overloaded: 3, Unavailable: 4 }

const ofValue = (value: unknown): Outcome => {
  if (Shed.isShed(value)) return "Ignored"
  if (Classify.isPoolExhausted(value)) return "Exhausted"
  const condition = Classify.conditionOf(value)
  switch (condition?.meaning) {
    case "unavailable":
      return "Unavailable"
    case "misconfigured":
      return "Ignored"
    case "transient":
      return overloadConditions.has(condition.name) ? "Overloaded" : "Answered"
    default:
      return "Answered"
  }
}

/**
 * The outcome of a request's exit, read from `@resilience/db-session`'s table (`Classify.conditionOf`) for every
 * failure and defect in the cause (HTTP handlers turn database errors into defects); the strongest signal wins
 * (`Unavailable`, then `Overloaded`, then `Exhausted`, then `Ignored`). An interruption is `Ignored`; a success `Answered`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const ofExit = (exit: Exit.Exit<unknown, unknown>): Outcome => {
  if (Exit.isSuccess(exit)) return "Answered"
  if (Cause.hasInterruptsOnly(exit.cause)) return "Ignored"
  let found: Outcome = "Answered"
  for (const reason of exit.cause.reasons) {
    const value = Cause.isFailReason(reason) ? reason.error : Cause.isDieReason(reason) ? reason.defect : undefined
    const outcome = ofValue(value)
    if (rank[outcome] > rank[found]) found = outcome
  }
  return found
}

/**
 * What an outcome says to the circuit ({@link Breaker}): only `Unavailable` counts against the database; an
 * answer, even a slow or struggling one (`Overloaded`), is an answer; `Exhausted` and `Ignored` tell nothing.
 *
 * @since 0.2.0
 * @category decisions
 */
export const toBreaker = (outcome: Outcome): Breaker.Outcome => {
  switch (outcome) {
    case "Unavailable":
      return "Unavailable"
    case "Answered":
    case "Overloaded":
      return "Answered"
    case "Exhausted":
    case "Ignored":
      return "Ignored"
  }
}
