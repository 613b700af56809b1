/**
 * Enqueueing items: the one statement a writer sends to put work on the queue, on a connection it checked out (in
 * its own transaction, to enqueue atomically with its other writes).
 *
 * @since 0.3.0
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import type { SchemaName } from "@resilience/schema"
import type { Effect } from "effect"
import { perSchema } from "./internal/Names.ts"
import { forRows } from "./internal/Rows.ts"
import { decode } from "./internal/RowSchemas.ts"

/**
 * One item to enqueue. Items with the same `workUnitKey` are processed one at a time, in id order.
 *
 * @since 0.1.0
 * @category models
 */
export interface NewItem {
  /** The serialization key, e.g. `representation:{workspace}:{session}:{peer}`. */
  readonly workUnitKey: string
  /** Selects the handler in the {@link Handlers} registry. */
  readonly taskType: string
  /** Any JSON value; stored as jsonb. */
  readonly payload: unknown
  /**
   * The earliest time the item may run (epoch milliseconds or a `Date`); default: at once. Until then its unit's
   * later items wait too (a unit stays serial).
   *
   * @since 0.3.0
   */
  readonly runAt?: number | Date | undefined
}

/**
 * The enqueue statement: `$1` a JSON array of `{ work_unit_key, task_type, payload, run_at }`, inserted in array
 * order (ids follow it). An item without a time of its own, enqueued into a unit whose first live item has one (a
 * retry, a later time), takes that time: it could not run before anyway.
 */
const enqueueSql = perSchema(({ queue }) =>
  `WITH inserted AS (
  INSERT INTO ${queue} (work_unit_key, task_type, payload, run_at)
  SELECT e.value ->> 'work_unit_key', e.value ->> 'task_type', coalesce(e.value -> 'payload', '{}'::jsonb),
    coalesce(
      to_timestamp((e.value ->> 'run_at')::float8 / 1000),
      (SELECT h.run_at FROM ${queue} h
       WHERE h.work_unit_key = e.value ->> 'work_unit_key' AND NOT h.processed AND h.dead_at IS NULL
       ORDER BY h.id LIMIT 1)
    )
  FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(value, n)
  ORDER BY e.n
  RETURNING 1
) SELECT count(*)::int AS n FROM inserted`
)

/**
 * Enqueues items in one statement on the given connection (use a transaction to enqueue atomically with
 * other writes). Returns the number of rows inserted. An item without a time of its own, enqueued into a unit
 * whose first live item has one (a retry, a later time), takes that time: it could not run before anyway (one
 * probe of the unit's first item).
 *
 * @since 0.1.0
 * @category effects
 */
export const enqueue = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  items: ReadonlyArray<NewItem>
): Effect.Effect<number, QueryFailed | DatabaseUnavailable> =>
  forRows(
    connection,
    items,
    (item) => ({
      work_unit_key: item.workUnitKey,
      task_type: item.taskType,
      payload: item.payload ?? null,
      run_at: item.runAt === undefined ? null : Number(item.runAt)
    }),
    enqueueSql(schema),
    (rows) => rows.length === 0 ? 0 : decode.enqueue(rows[0]).n
  )
