/**
 * Reading a statement's rows: one decoder per statement's row `Schema`, built once, and the run of a statement
 * whose rows go through it (a row of the wrong shape fails the statement with `QueryFailed` naming the statement and
 * the field); and one statement over many rows passed as a JSON array in `$1`.
 *
 * @internal
 */
import type { Connection, DatabaseUnavailable } from "@resilience/db-session"
import { QueryFailed } from "@resilience/db-session"
import { Effect, Result, Schema } from "effect"

/** A value that a statement's schema refused: thrown by a decoder below, caught by {@link query} alone. */
class WrongShape {
  readonly statement: string
  readonly issue: string
  constructor(statement: string, issue: string) {
    this.statement = statement
    this.issue = issue
  }
}

/** Where a refused value sits: the column of a JSON text, then the path the schema names. */
const issueOf = (error: Schema.SchemaError, column: string | undefined): string =>
  (column === undefined ? "" : `${column}: `) + error.message.replace(/\n\s*/g, " ")

/**
 * The decoder of the values `schema` describes (a statement's row, or with `column` the value of one of its JSON
 * columns), built once: the value, typed; a value of the wrong shape throws for {@link query}, which fails the
 * statement with `QueryFailed` naming `statement` and the field.
 */
export const decoder = <S extends Schema.ConstraintDecoder<unknown>>(
  statement: string,
  schema: S,
  column?: string
): (value: unknown) => S["Type"] => {
  const decode = Schema.decodeUnknownResult(schema)
  return (value) => {
    const result = decode(value)
    if (Result.isSuccess(result)) return result.success
    throw new WrongShape(statement, issueOf(result.failure, column))
  }
}

/** The value of a JSON column (`jsonb::text`, `json_agg(…)::text`) of `statement`'s rows; text that is not JSON throws as {@link decoder} does. */
export const jsonOf = (statement: string, column: string) => (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    throw new WrongShape(statement, `${column}: Expected JSON text`)
  }
}

/**
 * Runs `sql` and reads its rows with `read`, which decodes them with {@link decoder}s: a row of the wrong shape fails
 * with `QueryFailed` (no SQLSTATE) whose message names the statement and the field.
 */
export const query = <A>(
  connection: Connection,
  sql: string,
  params: ReadonlyArray<unknown>,
  read: (rows: ReadonlyArray<unknown>) => A
): Effect.Effect<A, QueryFailed | DatabaseUnavailable> =>
  Effect.flatMap(connection.query<unknown>(sql, params), (rows) => {
    try {
      return Effect.succeed(read(rows))
    } catch (error) {
      return error instanceof WrongShape
        ? Effect.fail(
          new QueryFailed({
            code: undefined,
            message: `${error.statement} returned a row of the wrong shape: ${error.issue}`
          })
        )
        : Effect.die(error)
    }
  })

/** How many rows `decode` accepted (a statement that returns a row per row it touched). */
export const countOf = (decode: (row: unknown) => unknown) => (rows: ReadonlyArray<unknown>): number => {
  for (const row of rows) decode(row)
  return rows.length
}

/** The statement over `rows` (as `$1`) and the count `count` reads from its rows; no statement at all for no rows. */
export const forRows = <A>(
  connection: Connection,
  rows: ReadonlyArray<A>,
  toJson: (row: A) => Record<string, unknown>,
  sql: string,
  count: (result: ReadonlyArray<unknown>) => number
): Effect.Effect<number, QueryFailed | DatabaseUnavailable> =>
  rows.length === 0
    ? Effect.succeed(0)
    : query(connection, sql, [JSON.stringify(rows.map(toJson))], count)

/** An item from a decoded row with its payload as jsonb text, parsed by `payload`. */
export const itemOf = (
  row: { readonly id: string; readonly task_type: string; readonly payload: string; readonly attempts: number },
  workUnitKey: string,
  payload: (text: string) => unknown
): {
  readonly id: string
  readonly workUnitKey: string
  readonly taskType: string
  readonly payload: unknown
  readonly attempts: number
} => ({
  id: row.id,
  workUnitKey,
  taskType: row.task_type,
  payload: payload(row.payload),
  attempts: row.attempts
})
