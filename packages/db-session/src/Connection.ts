/**
 * A checked-out connection, valid inside the `withConnection` / `transaction` callback that received it.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type { DatabaseUnavailable, QueryFailed } from "./Errors.ts"

/**
 * A checked-out connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface Connection {
  /**
   * Runs one statement with `$1`, `$2`, … placeholders (for both drivers) and returns its rows. A statement the
   * server rejects is `QueryFailed` with its SQLSTATE; a connection lost mid-statement is `DatabaseUnavailable`.
   */
  readonly query: <Row = Record<string, unknown>>(
    sql: string,
    params?: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<Row>, QueryFailed | DatabaseUnavailable>
}
