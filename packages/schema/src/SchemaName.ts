/**
 * Validated, quoted PostgreSQL schema names: the only way a tenant schema reaches SQL text.
 *
 * @since 0.1.0
 */
import { InvalidParameter } from "@resilience/parameters"
import { Config, Effect, Schema } from "effect"

/**
 * A schema name that passed {@link isValid}: lower-case ASCII letters, digits and `_`, starting with a letter
 * or `_`, at most 63 bytes, not `pg_*` or `information_schema`. Only {@link make}, {@link config} and
 * {@link makeUnsafe} produce one.
 *
 * @since 0.1.0
 * @category models
 */
export type SchemaName = string & { readonly SchemaName: unique symbol }

/**
 * A schema name that is not allowed, with the reason.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidSchemaName extends Schema.TaggedError<InvalidSchemaName>()("InvalidSchemaName", {
  name: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `schema name ${JSON.stringify(this.name)} is not allowed: ${this.reason}`
  }
}

const pattern = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Why a name is not a valid schema name, or `undefined` when it is.
 *
 * @since 0.1.0
 * @category validation
 */
export const problem = (name: string): string | undefined => {
  if (!pattern.test(name)) {
    return "expected 1 to 63 characters of a-z, 0-9 and _, starting with a letter or _"
  }
  if (name.startsWith("pg_") || name === "information_schema") {
    return "reserved by PostgreSQL"
  }
  return undefined
}

/** What a schema name may be, in words. */
const allowed = "1 to 63 characters of a-z, 0-9 and _, starting with a letter or _, not pg_* nor information_schema"

/**
 * Whether a string is an allowed schema name.
 *
 * @since 0.1.0
 * @category validation
 */
export const isValid = (name: string): name is SchemaName => problem(name) === undefined

/**
 * Validates a schema name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (name: string): Effect.Effect<SchemaName, InvalidSchemaName> => {
  const reason = problem(name)
  return reason === undefined
    ? Effect.succeed(name as SchemaName)
    : Effect.fail(new InvalidSchemaName({ name, reason }))
}

/**
 * Validates a schema name, throwing on an invalid one (for constants in tests and benchmarks).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = (name: string): SchemaName => {
  const reason = problem(name)
  if (reason !== undefined) throw new InvalidSchemaName({ name, reason })
  return name as SchemaName
}

/**
 * A schema name read from the environment variable the application names (the apps pass `DB_SCHEMA`); unset:
 * `public`. An invalid one fails config loading with a message that names the variable.
 *
 * @since 0.1.0
 * @category constructors
 */
export const config = (variable: string): Config.Config<SchemaName> =>
  Config.String(variable).pipe(
    Config.withDefault("public"),
    InvalidParameter.validateConfig((name) =>
      isValid(name)
        ? Effect.succeed(name)
        : Effect.fail(new InvalidParameter.InvalidParameter({ parameter: variable, value: name, allowed }))
    )
  )

/**
 * A quoted identifier (`"name"`, inner quotes doubled): safe even for names that were not validated.
 *
 * @since 0.1.0
 * @category quoting
 */
export const quoteIdentifier = (identifier: string): string => `"${identifier.replaceAll("\"", "\"\"")}"`

/**
 * The quoted schema, e.g. `"tenant_1"`.
 *
 * @since 0.1.0
 * @category quoting
 */
export const quote = (schema: SchemaName): string => quoteIdentifier(schema)

/**
 * A quoted, schema-qualified name, e.g. `"tenant_1"."queue"`.
 *
 * @since 0.1.0
 * @category quoting
 */
export const qualify = (schema: SchemaName, name: string): string => `${quote(schema)}.${quoteIdentifier(name)}`
