/**
 * How the deriver tells a database failure (leave the item for later, back off) from a handler failure
 * (mark the item with its error and move on), and how it renders an error for the `error` column and logs.
 *
 * @since 0.1.0
 */
import { Predicate } from "effect"

/**
 * SQLSTATEs of statements that failed for a transient reason on a live connection: serialization failure,
 * deadlock, lock not available, statement cancelled, and the whole class 08 (connection exceptions).
 *
 * @since 0.1.0
 */
export const transientSqlStates: ReadonlySet<string> = new Set(["40001", "40P01", "55P03", "57014"])

/**
 * Whether a failure means "the database, not the item": `DatabaseUnavailable`, `DatabaseMisconfigured`, or a
 * `QueryFailed` with a transient SQLSTATE. Such an item stays unprocessed and the worker backs off.
 *
 * @since 0.1.0
 */
export const isDatabaseFailure = (error: unknown): boolean => {
  if (Predicate.isTagged(error, "DatabaseUnavailable") || Predicate.isTagged(error, "DatabaseMisconfigured")) {
    return true
  }
  if (Predicate.isTagged(error, "QueryFailed") && Predicate.hasProperty(error, "code")) {
    const code = error.code
    return typeof code === "string" && (transientSqlStates.has(code) || code.startsWith("08"))
  }
  return false
}

const maxLength = 2000

/**
 * A one-line description of an error or defect: `Tag: message` for tagged errors, the message for `Error`s,
 * JSON for plain values; at most 2,000 characters.
 *
 * @since 0.1.0
 */
export const describe = (error: unknown): string => {
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
