/**
 * Logs what the database is going through once per change, not once per poll: the first failure of a kind
 * (an outage, a read-only primary, a bad password) is logged (WARN for conditions that pass by themselves,
 * ERROR for a misconfiguration or a failure that is not the database's), repeats of the same kind are DEBUG,
 * and the first success after a failure logs INFO "database available again". One per deriver, shared by its
 * poll and its workers.
 *
 * @since 0.2.0
 */
import { Classify } from "@resilience/db-session"
import { Effect } from "effect"
import * as Failures from "../Failures.ts"

/**
 * The log of one deriver's database condition.
 *
 * @since 0.2.0
 * @category models
 */
export interface ConditionLog {
  /** Logs `message` for `error` if its kind differs from the last one reported; DEBUG otherwise. */
  readonly report: (
    message: string,
    error: unknown,
    annotations?: Record<string, unknown>
  ) => Effect.Effect<void>
  /** Marks the database as working again; logs once if a condition was reported before. */
  readonly recovered: Effect.Effect<void>
}

/**
 * The kind of a failure for change detection: the table's meaning and name for a database error (e.g.
 * `transient:ReadOnly`, `unavailable:Saturated`), `other` for anything else.
 *
 * @since 0.2.0
 * @category decisions
 */
export const kindOf = (error: unknown): string => {
  const condition = Classify.conditionOf(error)
  return condition === undefined ? "other" : `${condition.meaning}:${condition.name}`
}

/**
 * A fresh log, in the "nothing reported" state.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (schema: string): Effect.Effect<ConditionLog> =>
  Effect.sync(() => {
    let last: string | undefined
    const report = (message: string, error: unknown, annotations: Record<string, unknown> = {}) =>
      Effect.suspend(() => {
        const kind = kindOf(error)
        const changed = kind !== last
        last = kind
        const meaning = Classify.meaningOf(error)
        const log = !changed
          ? Effect.logDebug
          : meaning === "unavailable" || meaning === "transient"
          ? Effect.logWarning
          : Effect.logError
        return log(message).pipe(
          Effect.annotateLogs({
            schema,
            ...annotations,
            condition: kind,
            ...(changed ? { previous: null } : { repeated: true }),
            error: Failures.errorText(error)
          })
        )
      })
    const recovered = Effect.suspend(() => {
      if (last === undefined) return Effect.void
      const previous = last
      last = undefined
      return Effect.logInfo("database available again").pipe(Effect.annotateLogs({ schema, previous }))
    })
    return { report, recovered }
  })
