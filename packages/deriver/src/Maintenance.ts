/**
 * The queue's maintenance: the stale cleanup (ownership rows whose heartbeat stopped), the history retention
 * (processed items past their window) and the depth sample (the gauges of due and waiting items). Each is one
 * statement on a connection the caller checked out; the deriver runs them on its jittered cleanup schedule.
 *
 * @since 0.3.0
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import type { SchemaName } from "@resilience/schema"
import { Clock, Effect } from "effect"
import { perSchema } from "./internal/Names.ts"
import { query } from "./internal/Rows.ts"
import { decode } from "./internal/RowSchemas.ts"

/**
 * The stale cleanup statement: deletes ownership rows whose heartbeat is older than `$1` seconds, skipping
 * rows that another transaction has locked (`FOR UPDATE SKIP LOCKED`).
 *
 * @since 0.1.0
 * @category statements
 */
export const cleanupStaleSql: (schema: SchemaName.SchemaName) => string = perSchema(({ sessions }) =>
  `DELETE FROM ${sessions} WHERE id IN (
  SELECT id FROM ${sessions}
  WHERE last_updated < now() - make_interval(secs => $1::float8)
  FOR UPDATE SKIP LOCKED
) RETURNING work_unit_key`
)

/**
 * Removes stale ownership rows (no heartbeat for `staleAfterSeconds`); returns the freed unit keys.
 *
 * @since 0.1.0
 * @category effects
 */
export const cleanupStale = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  staleAfterSeconds: number
): Effect.Effect<ReadonlyArray<string>, QueryFailed | DatabaseUnavailable> =>
  query(
    connection,
    cleanupStaleSql(schema),
    [staleAfterSeconds],
    (rows) => rows.map((row) => decode.cleanupStale(row).work_unit_key)
  )

/**
 * Deletes up to `limit` processed items created more than `olderThanSeconds` ago (the history retention);
 * returns how many it deleted. Reads the partial index of processed rows by age, skips rows another
 * transaction holds, and never touches unprocessed items.
 *
 * @since 0.2.0
 * @category effects
 */
export const pruneHistory = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  olderThanSeconds: number,
  limit: number
): Effect.Effect<number, QueryFailed | DatabaseUnavailable> =>
  query(connection, pruneHistorySql(schema), [olderThanSeconds, limit], decode.pruneHistory)

/** The history retention's statement: `$1` the window in seconds, `$2` the most rows to delete. */
const pruneHistorySql = perSchema(({ queue }) =>
  `DELETE FROM ${queue} WHERE id IN (
  SELECT id FROM ${queue} WHERE processed AND created_at < now() - make_interval(secs => $1::float8)
  ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
) RETURNING 1`
)

/**
 * The queue's depth and its oldest due item, as the deriver samples them for its gauges: live items (unprocessed,
 * not dead letters) that are due now and those waiting for their time (a retry's, or the time they were enqueued
 * with), each counted up to `cap`; and when the oldest due item became due (epoch milliseconds; null when none is).
 *
 * @since 0.3.0
 * @category models
 */
export interface Depth {
  /** Due items, at most `cap` (a value of `cap` means at least that many). */
  readonly due: number
  /** Items waiting for their time, at most `cap`. */
  readonly waiting: number
  /** When the oldest due item became due: its `run_at`, or its `created_at` when it never had a time. */
  readonly oldestDueAt: number | null
}

/**
 * The depth statement (see {@link Depth}); `$1` the cap, `$2` now in epoch milliseconds. It reads only the claim's
 * partial indexes: items never timed (`queue_ready_id_idx`) and timed ones (`queue_run_at_idx`; a dead letter's
 * time is `infinity`, so it is left out without reading the row). Each count stops after `$1` rows (`LIMIT`), so
 * its cost is bounded by the cap, not the backlog; the oldest due item is the first row of each index. The
 * measurements are in docs/results/queue-depth.md.
 *
 * @since 0.3.0
 * @category statements
 */
export const depthSql: (schema: SchemaName.SchemaName) => string = perSchema(({ queue }) =>
  `SELECT
  (SELECT count(*) FROM (SELECT 1 FROM ${queue} WHERE NOT processed AND run_at IS NULL LIMIT $1) r)::int AS ready,
  (SELECT count(*) FROM (SELECT 1 FROM ${queue} WHERE NOT processed AND run_at <= to_timestamp($2::float8 / 1000) LIMIT $1) d)::int AS due,
  (SELECT count(*) FROM (
     SELECT 1 FROM ${queue} WHERE NOT processed AND run_at > to_timestamp($2::float8 / 1000) AND run_at < 'infinity' LIMIT $1
   ) w)::int AS waiting,
  (extract(epoch FROM least(
     (SELECT created_at FROM ${queue} WHERE NOT processed AND run_at IS NULL ORDER BY id LIMIT 1),
     (SELECT run_at FROM ${queue} WHERE NOT processed AND run_at <= to_timestamp($2::float8 / 1000) ORDER BY run_at, id LIMIT 1)
   )) * 1000)::float8 AS oldest_due_at`
)

/**
 * Samples the queue's {@link Depth}, counting up to `cap` per state; "due" by the `Clock`. One statement.
 *
 * @since 0.3.0
 * @category effects
 */
export const depth = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  cap: number
): Effect.Effect<Depth, QueryFailed | DatabaseUnavailable> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    query(connection, depthSql(schema), [cap, now], (rows) => {
      const row = rows.length === 0 ? undefined : decode.depth(rows[0])
      return {
        due: Math.min(cap, (row?.ready ?? 0) + (row?.due ?? 0)),
        waiting: row?.waiting ?? 0,
        oldestDueAt: row?.oldest_due_at ?? null
      }
    }))
