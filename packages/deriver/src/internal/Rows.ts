/**
 * One statement over many rows passed as a JSON array in `$1`.
 *
 * @internal
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import { Effect } from "effect"

/** The statement over `rows` (as `$1`) and the count it reports; no statement at all for no rows. */
export const forRows = <A, Row = Record<string, unknown>>(
  connection: Connection,
  rows: ReadonlyArray<A>,
  toJson: (row: A) => Record<string, unknown>,
  sql: string,
  count: (result: ReadonlyArray<Row>) => number
): Effect.Effect<number, QueryFailed | DatabaseUnavailable> =>
  rows.length === 0
    ? Effect.succeed(0)
    : Effect.map(connection.query<Row>(sql, [JSON.stringify(rows.map(toJson))]), count)

/** An item from a row with its payload as jsonb text (always valid JSON). */
export const itemOf = (
  row: { readonly id: string; readonly task_type: string; readonly payload: string; readonly attempts: number },
  workUnitKey: string
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
  payload: JSON.parse(row.payload) as unknown,
  attempts: row.attempts
})
