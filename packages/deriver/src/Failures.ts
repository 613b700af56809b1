/**
 * How the deriver tells a database failure (leave the item for later, back off) from a handler failure
 * (mark the item with its error and move on), and how it renders an error for the `error` column and logs.
 *
 * @since 0.1.0
 */
import { Classify } from "@resilience/db-session"
import { Predicate } from "effect"

/**
 * Whether a failure means "the database, not the item": anything `@resilience/db-session`'s table calls
 * unavailable, transient or misconfigured. Such an item stays unprocessed and the worker backs off; only a
 * permanent database error (the handler's data is wrong) or a failure of the handler's own is recorded as the
 * item's error.
 *
 * Read through db-session's one table (`Classify`), for db-session's errors and for a raw driver error alike:
 * a handler that uses a driver directly (a `pg` `DatabaseError`, a postgres.js `PostgresError`: a server's
 * error response, with a SQLSTATE and a severity), thrown as a failure or a defect, or wrapped as the `cause`
 * of another error (`Effect.tryPromise`), means what its SQLSTATE means. A Node system code alone
 * (`ECONNREFUSED`, `ETIMEDOUT`) is not read as the database's: a handler's own HTTP call fails with those too.
 *
 * @since 0.1.0
 * @category classifying
 */
export const isDatabaseFailure = (error: unknown): boolean => {
  let current = error
  for (let depth = 0; depth < maxCauseDepth && current !== undefined && current !== null; depth++) {
    if (Classify.isDatabaseCondition(current) || isDriverCondition(current)) return true
    current = Predicate.hasProperty(current, "cause") ? current.cause : undefined
  }
  return false
}

/** How deep {@link isDatabaseFailure} follows `cause`. */
const maxCauseDepth = 5

/** A server's error response thrown by a driver as is, whose SQLSTATE db-session's table calls a condition. */
const isDriverCondition = (error: unknown): boolean => {
  if (!Predicate.hasProperty(error, "severity") || !Predicate.hasProperty(error, "code")) return false
  const described = Classify.codeAndMessage(error)
  if (!Classify.isSqlState(described.code)) return false
  const row = Classify.lookup(described)
  return row !== undefined && row.meaning !== "permanent"
}

const maxLength = 2000

/**
 * A one-line description of an error or defect: `Tag: message` for tagged errors, the message for `Error`s,
 * JSON for plain values; at most 2,000 characters. What the item's `error` column and the deriver's logs hold.
 *
 * @since 0.3.0
 * @category rendering
 */
export const errorText = (error: unknown): string => {
  let text: string
  if (Predicate.hasProperty(error, "message") && typeof error.message === "string") {
    const tag = Predicate.hasProperty(error, "_tag") && typeof error._tag === "string"
      ? error._tag
      : Predicate.hasProperty(error, "name") && typeof error.name === "string"
      ? error.name
      : "Error"
    text = `${tag}: ${error.message}`
  } else if (typeof error === "string") {
    text = error
  } else {
    text = safeJson(error)
  }
  return text.length > maxLength ? `${text.slice(0, maxLength - 1)}…` : text
}

/**
 * The former name of {@link errorText}: it shared its name with db-session's `Classify.describe`, which answered
 * a different question ({code, message}) and is now `Classify.codeAndMessage`.
 *
 * @since 0.1.0
 * @category rendering
 * @deprecated Use {@link errorText}; removed in the next minor release.
 */
export const describe: (error: unknown) => string = errorText

const safeJson = (value: unknown): string => {
  const seen = new WeakSet<object>()
  const json = JSON.stringify(value, (_key, inner: unknown) => {
    if (typeof inner === "bigint") return inner.toString()
    if (typeof inner === "object" && inner !== null) {
      if (seen.has(inner)) return "[Circular]"
      seen.add(inner)
    }
    return inner
  })
  return json === undefined ? String(value) : json
}
