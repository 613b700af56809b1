/**
 * A parameter outside its allowed range: the one validation error of this repository (jitter and backoff
 * parameters, `Retry-After`, the deriver's and the API's settings, the simulator's flags), and its bridge to
 * Effect `Config`, so that a bad environment variable stops a process at start with the same message.
 *
 * @since 0.1.0
 */
import { Config, ConfigProvider, Effect, Schema } from "effect"
import { dual } from "effect/Function"

/**
 * A parameter (a jitter or backoff option, a setting, an environment variable) was outside its allowed range.
 * Carries the parameter's name, the value that was given and a human-readable description of the allowed range,
 * so a configuration error can be reported precisely (e.g. `ratio = 1.5 is not allowed: expected a number in [0, 1]`).
 *
 * @since 0.1.0
 * @category errors
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

/**
 * The `Config.ConfigError` that reports an invalid parameter (an environment variable, by its name).
 *
 * @since 0.2.0
 * @category decisions
 */
export const toConfigError = (error: InvalidParameter): Config.ConfigError =>
  new Config.ConfigError(new ConfigProvider.SourceError({ message: error.message }))

/**
 * A `Config` whose value must pass `validate`: an `InvalidParameter` stops config loading as a
 * `ConfigError` with the parameter's message.
 *
 * @since 0.2.0
 * @category config
 */
export const validateConfig: {
  <A, B>(validate: (a: A) => Effect.Effect<B, InvalidParameter>): (self: Config.Config<A>) => Config.Config<B>
  <A, B>(self: Config.Config<A>, validate: (a: A) => Effect.Effect<B, InvalidParameter>): Config.Config<B>
} = dual(
  2,
  <A, B>(self: Config.Config<A>, validate: (a: A) => Effect.Effect<B, InvalidParameter>): Config.Config<B> =>
    Config.mapEffect(self, (a) => Effect.mapError(validate(a), toConfigError))
)

const render = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value)
  if (typeof value === "number" && Object.is(value, -0)) return "-0"
  if (typeof value === "object" && value !== null && "toJSON" in value && typeof value.toJSON === "function") {
    return JSON.stringify(value.toJSON())
  }
  return String(value)
}
