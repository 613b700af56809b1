/**
 * The queue's SQL: enqueue, claim, stale cleanup, drain, mark and release. Every function runs on a
 * `Connection` that the caller checked out (one checkout per poll, per batch read, per batch record, per
 * transaction), so the caller decides what shares a transaction.
 *
 * @since 0.1.0
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Effect } from "effect"

/**
 * One item to enqueue. Items with the same `workUnitKey` are processed one at a time, in id order.
 *
 * @since 0.1.0
 */
export interface NewItem {
  /** The serialization key, e.g. `representation:{workspace}:{session}:{peer}`. */
  readonly workUnitKey: string
  /** Selects the handler in the {@link Handlers} registry. */
  readonly taskType: string
  /** Any JSON value; stored as jsonb. */
  readonly payload: unknown
}

/**
 * An unprocessed item as a worker sees it.
 *
 * @since 0.1.0
 */
export interface Item {
  /** The item's id (a bigint, as a decimal string). */
  readonly id: string
  readonly workUnitKey: string
  readonly taskType: string
  readonly payload: unknown
}

/**
 * A claim: the unit, its owner and the fencing token, the id of the ownership row the claim inserted. Ids
 * only grow, so a unit taken over (its row deleted by the stale cleanup) and claimed again, even by the same
 * owner, has a new id: every statement acting for a claim checks owner and id in the same statement, and a
 * worker that lost its unit can neither read more of its items nor complete them.
 *
 * @since 0.2.0
 */
export interface Claim {
  readonly workUnitKey: string
  readonly owner: string
  /** The ownership row's id (a bigint, as a decimal string). */
  readonly id: string
}

/**
 * The error type of every statement here.
 *
 * @since 0.1.0
 */
export type QueryError = QueryFailed | DatabaseUnavailable

const tables = (schema: SchemaName.SchemaName) => ({
  queue: SchemaName.qualify(schema, "queue"),
  sessions: SchemaName.qualify(schema, "active_queue_sessions")
})

/**
 * The names of the functions that queue migration 7 makes of {@link claimWithItemsSql} and {@link recordSql}
 * (`queue_claim`, `queue_record`, in the tenant schema). A unit's two statements call them instead of sending
 * their text: PL/pgSQL keeps each statement's plan for the life of the server connection, so the server plans
 * them once per connection, not on every call, with no named prepared statement on the wire (PgBouncer in
 * transaction mode before 1.21 cannot carry those). The measurements are in docs/results/deriver-throughput.md.
 *
 * @since 0.2.0
 */
export const functions = (schema: SchemaName.SchemaName) => ({
  claim: SchemaName.qualify(schema, "queue_claim"),
  record: SchemaName.qualify(schema, "queue_record")
})

/**
 * The calls a unit's statements send: `queue_claim($1 limit, $2 owner, $3 batch size)` and
 * `queue_record($1 outcomes, $2 unit, $3 owner, $4 release, $5 claim id)`, each as a `FROM` item (see
 * {@link functions}).
 *
 * @since 0.2.0
 */
export const calls = (schema: SchemaName.SchemaName) => {
  const { claim, record } = functions(schema)
  return {
    claim: `${claim}($1::integer, $2::text, $3::integer)`,
    record: `${record}($1::jsonb, $2::text, $3::text, $4::boolean, $5::bigint)`
  }
}

/**
 * One statement over `rows`, passed as a JSON array in `$1`, and the count it reports; no statement at all for
 * no rows.
 */
const forRows = <A, Row = Record<string, unknown>>(
  connection: Connection,
  rows: ReadonlyArray<A>,
  toJson: (row: A) => Record<string, unknown>,
  sql: string,
  count: (result: ReadonlyArray<Row>) => number
): Effect.Effect<number, QueryError> =>
  rows.length === 0
    ? Effect.succeed(0)
    : Effect.map(connection.query<Row>(sql, [JSON.stringify(rows.map(toJson))]), count)

/**
 * Enqueues items in one statement on the given connection (use a transaction to enqueue atomically with
 * other writes). Returns the number of rows inserted.
 *
 * @since 0.1.0
 */
export const enqueue = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  items: ReadonlyArray<NewItem>
): Effect.Effect<number, QueryError> =>
  forRows(
    connection,
    items,
    (item) => ({ work_unit_key: item.workUnitKey, task_type: item.taskType, payload: item.payload ?? null }),
    `WITH inserted AS (
      INSERT INTO ${tables(schema).queue} (work_unit_key, task_type, payload)
      SELECT e.value ->> 'work_unit_key', e.value ->> 'task_type', coalesce(e.value -> 'payload', '{}'::jsonb)
      FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(value, n)
      ORDER BY e.n
      RETURNING 1
    ) SELECT count(*)::int AS n FROM inserted`,
    (rows: ReadonlyArray<{ n: number }>) => rows[0]?.n ?? 0
  )

/**
 * The claim statement: up to `$1` work units with unprocessed items that nobody owns, oldest first (by their
 * first unprocessed id), made ours by inserting ownership rows (owner `$2`) with
 * `INSERT … ON CONFLICT DO NOTHING RETURNING`; a unit that another instance claimed in the meantime is
 * skipped. One statement, hence one transaction.
 *
 * It walks the unprocessed items in id order (`queue_pending_id_idx`) and keeps an item when its unit has no
 * owner and no earlier unprocessed item (a probe of `queue_unprocessed_idx`), so it stops after `$1` units:
 * its cost follows the units it skips (owned ones, later items of a unit), not the backlog (before migration 6
 * it grouped every unprocessed row by unit; the measurements are in docs/results/deriver-throughput.md).
 * It locks the first item of each unit it keeps (`FOR NO KEY UPDATE … SKIP LOCKED`) for the statement's short
 * transaction, so claims that run at the same moment (the workers of one process, or a fleet) take different
 * units at once instead of all picking the oldest, waiting for the one that inserts its ownership row first,
 * and coming back empty.
 *
 * @since 0.1.0
 */
export const claimSql = (schema: SchemaName.SchemaName): string =>
  `${claimCtes(schema)}
SELECT c.work_unit_key, claimed.id::text AS id FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id`

/** The candidates and the ownership rows inserted for them: the part every claim statement shares. */
const claimCtes = (schema: SchemaName.SchemaName): string => {
  const { queue, sessions } = tables(schema)
  return `WITH candidates AS MATERIALIZED (
  SELECT q.work_unit_key, q.id AS first_id
  FROM ${queue} q
  WHERE NOT q.processed
    AND NOT EXISTS (SELECT 1 FROM ${sessions} a WHERE a.work_unit_key = q.work_unit_key)
    AND NOT EXISTS (
      SELECT 1 FROM ${queue} e WHERE e.work_unit_key = q.work_unit_key AND NOT e.processed AND e.id < q.id
    )
  ORDER BY q.id
  LIMIT $1
  FOR NO KEY UPDATE OF q SKIP LOCKED
), claimed AS (
  INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
  SELECT c.work_unit_key, $2, now() FROM candidates c ORDER BY c.first_id
  ON CONFLICT (work_unit_key) DO NOTHING
  RETURNING work_unit_key, id
)`
}

/**
 * The claim statement of {@link claimSql} that also returns, per claimed unit, its first `$3` unprocessed
 * items in id order (as JSON text): the claim and the first read of each unit in one round trip. Fenced by
 * construction: the items are read by the statement that made the claim. Queue migration 7 installs it as the
 * function `queue_claim` ({@link functions}), which {@link claimWithItems} calls: a change to it needs a new
 * migration that replaces the function.
 *
 * @since 0.2.0
 */
export const claimWithItemsSql = (schema: SchemaName.SchemaName): string =>
  `${claimCtes(schema)}
SELECT c.work_unit_key, claimed.id::text AS id,
  (SELECT coalesce(json_agg(json_build_object('id', i.id::text, 'task_type', i.task_type, 'payload', i.payload)
                            ORDER BY i.id), '[]')::text
   FROM (SELECT q.id, q.task_type, q.payload FROM ${tables(schema).queue} q
         WHERE q.work_unit_key = c.work_unit_key AND NOT q.processed ORDER BY q.id LIMIT $3) i) AS items
FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id`

/**
 * Claims up to `limit` work units for `owner` with the first `batchSize` items of each (see
 * {@link claimWithItemsSql}), oldest first.
 *
 * @since 0.2.0
 */
export const claimWithItems = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  limit: number,
  owner: string,
  batchSize: number
): Effect.Effect<ReadonlyArray<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }>, QueryError> =>
  limit <= 0
    ? Effect.succeed([])
    : Effect.map(
      connection.query<{ work_unit_key: string; id: string; items: string }>(
        `SELECT work_unit_key, id, items FROM ${calls(schema).claim}`,
        [limit, owner, batchSize]
      ),
      (rows) => rows.map((row) => claimedOf(row, owner))
    )

/** A claimed unit with its first batch, from a row of {@link claimWithItemsSql} (items as JSON text). */
const claimedOf = (
  row: { readonly work_unit_key: string; readonly id: string; readonly items: string },
  owner: string
): { readonly claim: Claim; readonly items: ReadonlyArray<Item> } => ({
  claim: { workUnitKey: row.work_unit_key, owner, id: row.id },
  items: (JSON.parse(row.items) as ReadonlyArray<{ id: string; task_type: string; payload: unknown }>).map((
    item
  ) => ({ id: item.id, workUnitKey: row.work_unit_key, taskType: item.task_type, payload: item.payload }))
})

/**
 * Claims up to `limit` work units for `owner` (see {@link claimSql}); returns the {@link Claim}s, oldest first.
 *
 * @since 0.1.0
 */
export const claim = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  limit: number,
  owner: string
): Effect.Effect<ReadonlyArray<Claim>, QueryError> =>
  limit <= 0
    ? Effect.succeed([])
    : Effect.map(
      connection.query<{ work_unit_key: string; id: string }>(claimSql(schema), [limit, owner]),
      (rows) => rows.map((row) => ({ workUnitKey: row.work_unit_key, owner, id: row.id }))
    )

/**
 * The stale cleanup statement: deletes ownership rows whose heartbeat is older than `$1` seconds, skipping
 * rows that another transaction has locked (`FOR UPDATE SKIP LOCKED`).
 *
 * @since 0.1.0
 */
export const cleanupStaleSql = (schema: SchemaName.SchemaName): string => {
  const { sessions } = tables(schema)
  return `DELETE FROM ${sessions} WHERE id IN (
  SELECT id FROM ${sessions}
  WHERE last_updated < now() - make_interval(secs => $1::float8)
  FOR UPDATE SKIP LOCKED
) RETURNING work_unit_key`
}

/**
 * Removes stale ownership rows (no heartbeat for `staleAfterSeconds`); returns the freed unit keys.
 *
 * @since 0.1.0
 */
export const cleanupStale = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  staleAfterSeconds: number
): Effect.Effect<ReadonlyArray<string>, QueryError> =>
  Effect.map(
    connection.query<{ work_unit_key: string }>(cleanupStaleSql(schema), [staleAfterSeconds]),
    (rows) => rows.map((row) => row.work_unit_key)
  )

/**
 * The next unprocessed items of a claimed unit, in id order (at most `limit`); none once the claim is no
 * longer this worker's (fenced in the same statement).
 *
 * @since 0.1.0
 */
export const nextItems = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim,
  limit: number
): Effect.Effect<ReadonlyArray<Item>, QueryError> =>
  Effect.map(
    connection.query<{ id: string; task_type: string; payload: string }>(
      `SELECT q.id::text AS id, q.task_type, q.payload::text AS payload FROM ${tables(schema).queue} q
       WHERE q.work_unit_key = $1 AND NOT q.processed
         AND EXISTS (SELECT 1 FROM ${tables(schema).sessions} s
                     WHERE s.work_unit_key = $1 AND s.owner = $3 AND s.id = $4::bigint)
       ORDER BY q.id LIMIT $2`,
      [claim.workUnitKey, limit, claim.owner, claim.id]
    ),
    (rows) =>
      rows.map((row) => ({
        id: row.id,
        workUnitKey: claim.workUnitKey,
        taskType: row.task_type,
        // jsonb::text is always valid JSON.
        payload: JSON.parse(row.payload) as unknown
      }))
  )

/**
 * The outcome of one handled item: processed (`error` undefined) or marked with its error.
 *
 * @since 0.2.0
 */
export interface Outcome {
  readonly item: Item
  readonly error: string | undefined
}

/**
 * What {@link record} did: whether the claim still held (false: a stale cleanup took the unit away) and how
 * many items it marked (an item already marked by someone else is not marked again).
 *
 * @since 0.2.0
 */
export interface Recorded {
  readonly owned: boolean
  readonly marked: number
}

/** The outcomes as the record statement's `$1`: a JSON array of `{ id, error }`. */
const outcomesJson = (outcomes: ReadonlyArray<Outcome>): string =>
  JSON.stringify(outcomes.map(({ error, item }) => ({ id: item.id, error: error ?? null })))

/**
 * The record statement of {@link record}: `$1` the outcomes (a JSON array of `{ id, error }`), `$2` the unit,
 * `$3` the owner, `$4` release (else heartbeat), `$5` the claim id. Queue migration 7 installs it as the
 * function `queue_record` ({@link functions}), which {@link record} calls: a change to it needs a new migration
 * that replaces the function.
 *
 * @since 0.2.0
 */
export const recordSql = (schema: SchemaName.SchemaName): string => {
  const { queue, sessions } = tables(schema)
  return `WITH outcome AS (
        SELECT (o ->> 'id')::bigint AS id, o ->> 'error' AS error FROM jsonb_array_elements($1::jsonb) AS o
      ), beat AS (
        UPDATE ${sessions} SET last_updated = now()
        WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint AND NOT $4::boolean RETURNING 1
      ), released AS (
        DELETE FROM ${sessions}
        WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint AND $4::boolean RETURNING 1
      ), marked AS (
        UPDATE ${queue} q
        SET processed = true, error = outcome.error, processed_by = $3, processed_claim = $5::bigint,
            processed_at = clock_timestamp()
        FROM outcome
        WHERE q.id = outcome.id AND q.work_unit_key = $2 AND NOT q.processed
          AND (EXISTS (SELECT 1 FROM beat) OR EXISTS (SELECT 1 FROM released))
        RETURNING q.id
      ) SELECT (EXISTS (SELECT 1 FROM beat) OR EXISTS (SELECT 1 FROM released)) AS owned,
               (SELECT count(*) FROM marked)::int AS marked`
}

/**
 * Records the outcomes of a batch of one unit's items in ONE statement: marks each item processed (with its
 * error, if any), and either bumps the unit's heartbeat or, with `release`, deletes the ownership row (the
 * unit looked drained), all only while the claim holds (owner and id, in the same statement): a worker that
 * lost its unit marks nothing. Each marked item keeps the owner, the claim id and the time of its mark
 * (`processed_by`, `processed_claim`, `processed_at`). Rows of other claims are never touched. An item handled but not yet recorded
 * when the process dies is handled again by the next owner (at-least-once).
 *
 * @since 0.2.0
 */
export const record = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim,
  outcomes: ReadonlyArray<Outcome>,
  release: boolean
): Effect.Effect<Recorded, QueryError> =>
  Effect.map(
    connection.query<{ owned: boolean; marked: number }>(
      `SELECT owned, marked FROM ${calls(schema).record}`,
      [
        outcomesJson(outcomes),
        claim.workUnitKey,
        claim.owner,
        release,
        claim.id
      ]
    ),
    (rows) => ({ owned: rows[0]?.owned === true, marked: rows[0]?.marked ?? 0 })
  )

/**
 * The statement of {@link recordAndClaim}: `queue_record` with `$1`–`$5` as in {@link recordSql}, then, only
 * when the claim still held, `queue_claim` of up to `$6` units for the same owner with `$7` items each. Each
 * function's statement runs on a snapshot of its own, so the claim sees the record's release. One row per
 * claimed unit, or one row with no unit.
 *
 * @since 0.2.0
 */
export const recordAndClaimSql = (schema: SchemaName.SchemaName): string => {
  const { claim } = functions(schema)
  return `SELECT r.owned, r.marked, c.work_unit_key, c.id, c.items
FROM ${calls(schema).record} r
LEFT JOIN LATERAL ${claim}(CASE WHEN r.owned THEN $6::integer ELSE 0 END, $3::text, $7::integer) c ON true`
}

/**
 * {@link record}, then the claim of up to `limit` more units for the same owner, with the first `batchSize`
 * items of each (as {@link claimWithItems}), in ONE statement and one transaction: a worker that finishes a
 * unit takes its next one in the same round trip. Nothing is claimed when the record found the claim gone.
 *
 * @since 0.2.0
 */
export const recordAndClaim = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim,
  outcomes: ReadonlyArray<Outcome>,
  release: boolean,
  limit: number,
  batchSize: number
): Effect.Effect<
  {
    readonly recorded: Recorded
    readonly claimed: ReadonlyArray<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }>
  },
  QueryError
> =>
  Effect.map(
    connection.query<
      { owned: boolean; marked: number; work_unit_key: string | null; id: string | null; items: string | null }
    >(recordAndClaimSql(schema), [
      outcomesJson(outcomes),
      claim.workUnitKey,
      claim.owner,
      release,
      claim.id,
      limit,
      batchSize
    ]),
    (rows) => ({
      recorded: { owned: rows[0]?.owned === true, marked: rows[0]?.marked ?? 0 },
      claimed: rows.flatMap(({ id, items, work_unit_key }) =>
        work_unit_key === null || id === null || items === null
          ? []
          : [claimedOf({ work_unit_key, id, items }, claim.owner)]
      )
    })
  )

/**
 * Marks one item processed (with `error` when its handler failed) and bumps the unit's heartbeat: a
 * {@link record} of one outcome. Returns whether the claim still holds.
 *
 * @since 0.1.0
 */
export const complete = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  item: Item,
  claim: Claim,
  error: string | undefined
): Effect.Effect<boolean, QueryError> =>
  Effect.map(record(connection, schema, claim, [{ item, error }], false), (r) => r.owned)

/**
 * Bumps a claim's heartbeat; returns whether the claim still holds.
 *
 * @since 0.1.0
 */
export const heartbeat = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim
): Effect.Effect<boolean, QueryError> =>
  Effect.map(
    connection.query(
      `UPDATE ${tables(schema).sessions} SET last_updated = now()
       WHERE work_unit_key = $1 AND owner = $2 AND id = $3::bigint RETURNING 1`,
      [claim.workUnitKey, claim.owner, claim.id]
    ),
    (rows) => rows.length > 0
  )

/**
 * Releases claims (never the row of another claim with the same key, of any owner). Returns how many rows
 * were deleted.
 *
 * @since 0.1.0
 */
export const release = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claims: ReadonlyArray<Claim>
): Effect.Effect<number, QueryError> =>
  forRows(
    connection,
    claims,
    (c) => ({ work_unit_key: c.workUnitKey, owner: c.owner, id: c.id }),
    `DELETE FROM ${tables(schema).sessions} s
     USING jsonb_to_recordset($1::jsonb) AS c(work_unit_key text, owner text, id text)
     WHERE s.work_unit_key = c.work_unit_key AND s.owner = c.owner AND s.id = c.id::bigint
     RETURNING 1`,
    (rows) => rows.length
  )

/**
 * Releases every ownership row of `owner` (shutdown). Returns how many rows were deleted.
 *
 * @since 0.1.0
 */
export const releaseOwner = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  owner: string
): Effect.Effect<number, QueryError> =>
  Effect.map(
    connection.query(`DELETE FROM ${tables(schema).sessions} WHERE owner = $1 RETURNING 1`, [owner]),
    (rows) => rows.length
  )

/**
 * Deletes up to `limit` processed items created more than `olderThanSeconds` ago (the history retention);
 * returns how many it deleted. Reads the partial index of processed rows by age, skips rows another
 * transaction holds, and never touches unprocessed items.
 *
 * @since 0.2.0
 */
export const pruneHistory = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  olderThanSeconds: number,
  limit: number
): Effect.Effect<number, QueryError> => {
  const { queue } = tables(schema)
  return Effect.map(
    connection.query(
      `DELETE FROM ${queue} WHERE id IN (
         SELECT id FROM ${queue} WHERE processed AND created_at < now() - make_interval(secs => $1::float8)
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
       ) RETURNING 1`,
      [olderThanSeconds, limit]
    ),
    (rows) => rows.length
  )
}
