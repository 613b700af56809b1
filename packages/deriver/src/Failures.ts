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
 * unavailable, transient or misconfigured (`Classify.isDatabaseCondition`). Such an item stays unprocessed and
 * the worker backs off; only a permanent database error (the handler's data is wrong) or a failure of the
 * handler's own is recorded as the item's error.
 *
 * @since 0.1.0
 */
export const isDatabaseFailure = (error: unknown): boolean => Classify.isDatabaseCondition(error)

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
