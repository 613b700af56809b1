/**
 * The one error of this package: a parameter outside its allowed range.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * A jitter or backoff parameter was outside its allowed range. Carries the parameter's name, the value
 * that was given and a human-readable description of the allowed range, so a configuration error can be
 * reported precisely (e.g. `ratio = 1.5 is not allowed: expected a number in [0, 1]`).
 *
 * @since 0.1.0
 */
export class InvalidParameter extends Schema.TaggedError<InvalidParameter>()("InvalidParameter", {
  /** The parameter's name, e.g. `"ratio"` or `"max"`. */
  parameter: Schema.String,
  /** The value that was given, as given. */
  value: Schema.Unknown,
  /** The allowed range, e.g. `"a number in [0, 1]"`. */
  allowed: Schema.String
}) {
  override get message(): string {
    return `${this.parameter} = ${render(this.value)} is not allowed: expected ${this.allowed}`
  }
}

const render = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number" && Object.is(value, -0)) return "-0"
  if (typeof value === "object" && value !== null && "toJSON" in value && typeof value.toJSON === "function") {
    return JSON.stringify(value.toJSON())
  }
  return String(value)
}
