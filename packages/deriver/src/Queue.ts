/**
 * The queue's SQL: enqueue, claim, stale cleanup, drain, mark and release. Every function runs on a
 * `Connection` that the caller checked out (one checkout per poll, per batch read, per batch record, per
 * transaction), so the caller decides what shares a transaction.
 *
 * @since 0.1.0
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Clock, Effect } from "effect"

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
 * An unprocessed item as a worker sees it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Item {
  /** The item's id (a bigint, as a decimal string). */
  readonly id: string
  readonly workUnitKey: string
  readonly taskType: string
  readonly payload: unknown
  /**
   * How many times a handler ran on this item with its outcome recorded (0 on the first run; retries count up).
   * Always set on items the queue returns; optional so that items built by hand (tests) need not name it.
   *
   * @since 0.3.0
   */
  readonly attempts?: number | undefined
}

/**
 * A claim: the unit, its owner and the fencing token, the id of the ownership row the claim inserted. Ids
 * only grow, so a unit taken over (its row deleted by the stale cleanup) and claimed again, even by the same
 * owner, has a new id: every statement acting for a claim checks owner and id in the same statement, and a
 * worker that lost its unit can neither read more of its items nor complete them.
 *
 * @since 0.2.0
 * @category models
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
 * @category models
 */
export type QueryError = QueryFailed | DatabaseUnavailable

const tables = (schema: SchemaName.SchemaName) => ({
  queue: SchemaName.qualify(schema, "queue"),
  sessions: SchemaName.qualify(schema, "active_queue_sessions")
})

/**
 * A statement text made once per schema: the texts a unit sends (its claim, its record, its next items) are the
 * same for every unit of a schema, and quoting and qualifying them again cost the deriver's loop about 5 µs per
 * item (docs/results/deriver-throughput.md). One entry per schema the process uses.
 */
const perSchema = (make: (schema: SchemaName.SchemaName) => string): (schema: SchemaName.SchemaName) => string => {
  const made = new Map<string, string>()
  return (schema) => {
    let text = made.get(schema)
    if (text === undefined) {
      text = make(schema)
      made.set(schema, text)
    }
    return text
  }
}

/**
 * The names of the functions that queue migration 7 made and migration 8 replaced with {@link claimBody} and
 * {@link recordBody} (`queue_claim`, `queue_record`, in the tenant schema), and the one migration 8 added for the
 * common record, {@link recordDoneSql} (`queue_record_done`). A unit's two statements call them instead of sending
 * their text: PL/pgSQL keeps each statement's plan for the life of the server connection, so the server plans
 * them once per connection, not on every call, with no named prepared statement on the wire (PgBouncer in
 * transaction mode before 1.21 cannot carry those). The measurements are in docs/results/deriver-throughput.md.
 *
 * @since 0.2.0
 * @category decisions
 */
export const functions = (schema: SchemaName.SchemaName) => ({
  claim: SchemaName.qualify(schema, "queue_claim"),
  record: SchemaName.qualify(schema, "queue_record"),
  /** `queue_record` for a batch whose outcomes are all done ({@link recordDoneSql}; since 0.3.0). */
  recordDone: SchemaName.qualify(schema, "queue_record_done")
})

/**
 * The calls a unit's statements send: `queue_claim($1 limit, $2 owner, $3 batch size, $4 now)` (`now` in epoch
 * milliseconds, from the deriver's `Clock`: what "due" means) and
 * `queue_record($1 outcomes, $2 unit, $3 owner, $4 release, $5 claim id)` (`queue_record_done` with the same
 * arguments when every outcome is done), each as a `FROM` item (see
 * {@link functions}).
 *
 * @since 0.2.0
 * @category decisions
 */
export const calls = (schema: SchemaName.SchemaName) => {
  const { claim, record, recordDone } = functions(schema)
  const recordArguments = "($1::jsonb, $2::text, $3::text, $4::boolean, $5::bigint)"
  return {
    claim: `${claim}($1::integer, $2::text, $3::integer, $4::float8)`,
    record: `${record}${recordArguments}`,
    /** The record of a batch whose outcomes are all done, with the same arguments (since 0.3.0). */
    recordDone: `${recordDone}${recordArguments}`
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
 * other writes). Returns the number of rows inserted. An item without a time of its own, enqueued into a unit
 * whose first live item has one (a retry, a later time), takes that time: it could not run before anyway (one
 * probe of the unit's first item, see {@link recordSql}).
 *
 * @since 0.1.0
 * @category effects
 */
export const enqueue = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  items: ReadonlyArray<NewItem>
): Effect.Effect<number, QueryError> =>
  forRows(
    connection,
    items,
    (item) => ({
      work_unit_key: item.workUnitKey,
      task_type: item.taskType,
      payload: item.payload ?? null,
      run_at: item.runAt === undefined ? null : Number(item.runAt)
    }),
    `WITH inserted AS (
      INSERT INTO ${tables(schema).queue} (work_unit_key, task_type, payload, run_at)
      SELECT e.value ->> 'work_unit_key', e.value ->> 'task_type', coalesce(e.value -> 'payload', '{}'::jsonb),
        coalesce(
          to_timestamp((e.value ->> 'run_at')::float8 / 1000),
          (SELECT h.run_at FROM ${tables(schema).queue} h
           WHERE h.work_unit_key = e.value ->> 'work_unit_key' AND NOT h.processed AND h.dead_at IS NULL
           ORDER BY h.id LIMIT 1)
        )
      FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(value, n)
      ORDER BY e.n
      RETURNING 1
    ) SELECT count(*)::int AS n FROM inserted`,
    (rows: ReadonlyArray<{ n: number }>) => rows[0]?.n ?? 0
  )

/**
 * The claim statement: up to `$1` work units whose first live item (unprocessed, not a dead letter) is due and
 * that nobody owns, made ours by inserting ownership rows (owner `$2`) with `INSERT … ON CONFLICT DO NOTHING
 * RETURNING`; a unit that another instance claimed in the meantime is skipped. `$3` is now, in epoch
 * milliseconds (the deriver's `Clock`). One statement, hence one transaction.
 *
 * Candidates come from two walks, each stopping after `$1` units: the items that never had a time
 * (`run_at` null) in id order (`queue_ready_id_idx`), and the items whose time has come (`run_at ≤ now`) in time
 * order (`queue_run_at_idx`); the oldest `$1` by id win. An item waiting for its retry or its time is in neither
 * walk, nor is a dead letter (its time is `infinity`), so a claim's cost does not follow how many wait. An item
 * is kept when its unit has no owner and no earlier live item (two anti joins, each a probe of an index per
 * item): the later items of a waiting unit wait with it; a dead letter holds nothing back. Its cost follows the
 * units it skips (owned or waiting ones' later items), not the backlog (the measurements are in
 * docs/results/deriver-throughput.md and docs/results/handler-retries.md). It locks the first item of each unit
 * it keeps (`FOR NO KEY UPDATE … SKIP LOCKED`) for the statement's short transaction, so claims that run at the
 * same moment (the workers of one process, or a fleet) take different units at once instead of all picking the
 * oldest.
 *
 * @since 0.1.0
 * @category statements
 */
export const claimSql = (schema: SchemaName.SchemaName): string =>
  `${claimCtes(schema, "$3", "both")}
SELECT c.work_unit_key, claimed.id::text AS id FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id`

/** `now` (epoch milliseconds, an SQL expression) as a timestamptz. */
const at = (nowMillis: string) => `to_timestamp(${nowMillis}::float8 / 1000)`

/**
 * The candidates and the ownership rows inserted for them: the part every claim statement shares. `walks`:
 * "both" walks the untimed items and the due timed ones; "ready" only the untimed ones (for when no timed item
 * is due, see {@link claimBody}).
 */
const claimCtes = (schema: SchemaName.SchemaName, nowMillis: string, walks: "both" | "ready"): string => {
  const { queue, sessions } = tables(schema)
  // Two probes per item, each a scalar subquery (a subplan run with the item's unit as its parameter), not an anti
  // join: a join's inner side may be planned as one scan of every unprocessed row, filtered per item, and a plan
  // made while the table was empty (a connection keeps it) did so: 585 ms a claim at 100,000 rows on PostgreSQL 15.
  // A subquery's only cheap plan is the probe of an index keyed by the unit: its first live item by
  // `queue_unprocessed_idx` (work_unit_key, id), which must be this item (no earlier live item of the unit), and its
  // ownership row by the unique key.
  const free = `q.id = (
      SELECT e.id FROM ${queue} e
      WHERE e.work_unit_key = q.work_unit_key AND NOT e.processed AND e.dead_at IS NULL
      ORDER BY e.work_unit_key, e.id LIMIT 1
    )
    AND (SELECT a.id FROM ${sessions} a WHERE a.work_unit_key = q.work_unit_key) IS NULL`
  const ready = `ready AS MATERIALIZED (
  SELECT q.work_unit_key, q.id AS first_id
  FROM ${queue} q
  WHERE NOT q.processed AND q.run_at IS NULL
    AND ${free}
  ORDER BY q.id
  LIMIT $1
  FOR NO KEY UPDATE OF q SKIP LOCKED
)`
  const candidates = walks === "ready"
    ? `WITH ${ready}, candidates AS MATERIALIZED (SELECT work_unit_key, first_id FROM ready)`
    : `WITH ${ready}, due AS MATERIALIZED (
  SELECT q.work_unit_key, q.id AS first_id
  FROM ${queue} q
  WHERE NOT q.processed AND q.run_at <= ${at(nowMillis)}
    AND ${free}
  ORDER BY q.run_at, q.id
  LIMIT $1
  FOR NO KEY UPDATE OF q SKIP LOCKED
), candidates AS MATERIALIZED (
  SELECT work_unit_key, first_id FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) u ORDER BY first_id LIMIT $1
)`
  return `${candidates}, claimed AS (
  INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
  SELECT c.work_unit_key, $2, now() FROM candidates c ORDER BY c.first_id
  ON CONFLICT (work_unit_key) DO NOTHING
  RETURNING work_unit_key, id
)`
}

/**
 * A unit's next live items in id order, at most `limit` (SQL expressions), up to (not including) the first that
 * is not yet due at `nowMillis`: a unit is handled in order, so an item waiting for its time holds back the rest.
 */
const unitItemsSql = (schema: SchemaName.SchemaName, unit: string, limit: string, nowMillis: string) =>
  `SELECT w.id, w.task_type, w.payload, w.attempts FROM (
     SELECT b.*, bool_or(b.run_at > ${at(nowMillis)}) OVER (ORDER BY b.id) AS held FROM (
       ${liveItemsSql(schema, unit, limit)}
     ) b
   ) w WHERE w.held IS NOT TRUE`

/** A unit's next live items (unprocessed, not dead letters) in id order with their times, at most `limit`. */
const liveItemsSql = (schema: SchemaName.SchemaName, unit: string, limit: string) =>
  `SELECT q.id, q.task_type, q.payload, q.attempts, q.run_at FROM ${tables(schema).queue} q
         WHERE q.work_unit_key = ${unit} AND NOT q.processed AND q.dead_at IS NULL
         ORDER BY q.id LIMIT ${limit}`

/**
 * Whether a claimed item `i` is later than `$4` (now): its time against now, compared only for an item that has
 * one (a comparison per item cost the claim of a 10-item unit about 20 µs); in the walk of untimed items only
 * ({@link claimBody} runs it when no timed item is due), every timed item is later, so having a time is enough.
 */
const laterSql = (walks: "both" | "ready") =>
  walks === "ready" ? "i.run_at IS NOT NULL" : `CASE WHEN i.run_at IS NOT NULL THEN i.run_at > ${at("$4")} END`

/**
 * A claim statement's result: per claimed unit, its first `$3` live items in id order as JSON text, each with
 * `later` (true when its time is after `$4`, now): the reader cuts the batch before the first later item
 * ({@link claimedOf}), as {@link unitItemsSql} does in SQL for the later batches. Cut by the reader, the batch
 * needs no window over it in the statement.
 */
const claimedItemsSql = (schema: SchemaName.SchemaName, walks: "both" | "ready") =>
  `SELECT c.work_unit_key, claimed.id::text AS id,
  (SELECT coalesce(json_agg(json_build_object('id', i.id::text, 'task_type', i.task_type, 'payload', i.payload,
                                              'attempts', i.attempts, 'later', ${laterSql(walks)})
                            ORDER BY i.id), '[]')::text
   FROM (${liveItemsSql(schema, "c.work_unit_key", "$3")}) i) AS items
FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id`

/**
 * The claim statement of {@link claimSql} that also returns, per claimed unit, its first `$3` live items in id
 * order (as JSON text, each marked `later` when its time is after `$4`, now; the reader keeps those before the
 * first later one): the claim and the first read of each unit in one round trip. Fenced by construction: the
 * items are read by the statement that made the claim. {@link claimBody} runs it (or, when no timed item is due,
 * {@link claimReadyWithItemsSql}) in the function `queue_claim` that queue migration 8 installs
 * ({@link functions}), which {@link claimWithItems} calls: a change to it needs a new migration that replaces
 * the function.
 *
 * @since 0.2.0
 * @category statements
 */
export const claimWithItemsSql = (schema: SchemaName.SchemaName): string =>
  `${claimCtes(schema, "$4", "both")}
${claimedItemsSql(schema, "both")}`

/**
 * {@link claimWithItemsSql} with the walk of untimed items only: what it claims when no timed item is due
 * ({@link claimBody}), so every timed item of a batch is marked `later` without a comparison with now. Sent on
 * its own while a timed item is due, it would hold that item back (and the rest of its unit) until the next
 * claim, never run it early.
 *
 * @since 0.3.0
 * @category statements
 */
export const claimReadyWithItemsSql = (schema: SchemaName.SchemaName): string =>
  `${claimCtes(schema, "$4", "ready")}
${claimedItemsSql(schema, "ready")}`

/**
 * Whether a timed item that is not a dead letter is due at `$4` (now, epoch milliseconds): the time of the
 * earliest one, one probe of `queue_run_at_idx` (dead letters, at `infinity`, are past its end), against now.
 * Null when there is none.
 *
 * @since 0.3.0
 * @category statements
 */
export const timedDueSql = (schema: SchemaName.SchemaName): string =>
  `(SELECT t.run_at FROM ${tables(schema).queue} t
      WHERE NOT t.processed AND t.run_at < 'infinity' ORDER BY t.run_at LIMIT 1) <= ${at("$4")}`

/**
 * The body of the function `queue_claim(limit, owner, batch size, now)` (queue migration 8): when a timed item
 * is due ({@link timedDueSql}), {@link claimWithItemsSql}, else {@link claimReadyWithItemsSql}, whose walk of
 * timed items would find none. Two statements, so each keeps a plan of its own: the claims of a queue with no
 * timed item due (most of them) skip the second walk. The test runs on a snapshot of its own: a timed item that
 * comes due between it and the claim waits for the next claim, and nothing runs early (the claim reads every
 * item's time).
 *
 * @since 0.3.0
 * @category statements
 */
export const claimBody = (schema: SchemaName.SchemaName): string =>
  branchBody(timedDueSql(schema), claimWithItemsSql(schema), claimReadyWithItemsSql(schema))

/** A PL/pgSQL function body that returns the rows of `then` when `test` holds, else those of `otherwise`. */
const branchBody = (test: string, then: string, otherwise: string) =>
  `$body$
#variable_conflict use_column
BEGIN
  IF ${test} THEN
    RETURN QUERY ${then};
  ELSE
    RETURN QUERY ${otherwise};
  END IF;
END
$body$`

/**
 * Claims up to `limit` work units for `owner` with the first `batchSize` due items of each (see
 * {@link claimWithItemsSql}), oldest first; "due" by the `Clock`.
 *
 * @since 0.2.0
 * @category effects
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
    : Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(
        connection.query<{ work_unit_key: string; id: string; items: string }>(
          claimWithItemsCall(schema),
          [limit, owner, batchSize, now]
        ),
        (rows) => rows.map((row) => claimedOf(row, owner))
      ))

const claimWithItemsCall = perSchema((schema) => `SELECT work_unit_key, id, items FROM ${calls(schema).claim}`)

/** An item of a claim statement's batch, as JSON ({@link claimedItemsSql}). */
interface ClaimedItem {
  readonly id: string
  readonly task_type: string
  readonly payload: unknown
  readonly attempts: number
  /** True when the item's time is after the claim's now; null when it has none. */
  readonly later: boolean | null
}

/**
 * A claimed unit with its first batch, from a row of {@link claimWithItemsSql} (items as JSON text): the items
 * before the first that is not yet due (the rest of the unit waits with it).
 */
const claimedOf = (
  row: { readonly work_unit_key: string; readonly id: string; readonly items: string },
  owner: string
): { readonly claim: Claim; readonly items: ReadonlyArray<Item> } => {
  const batch = JSON.parse(row.items) as ReadonlyArray<ClaimedItem>
  const held = batch.findIndex((item) => item.later === true)
  return {
    claim: { workUnitKey: row.work_unit_key, owner, id: row.id },
    items: (held === -1 ? batch : batch.slice(0, held)).map((item) => ({
      id: item.id,
      workUnitKey: row.work_unit_key,
      taskType: item.task_type,
      payload: item.payload,
      attempts: item.attempts
    }))
  }
}

/**
 * Claims up to `limit` work units for `owner` (see {@link claimSql}; "due" by the `Clock`); returns the
 * {@link Claim}s, oldest first. Runs as a call of the function `queue_claim` with no items per unit (the claim
 * of {@link claimWithItems}, whose kept plan walks the indexes in order): the statement's text, planned afresh on
 * each call, may sort the whole backlog (docs/results/deriver-throughput.md).
 *
 * @since 0.1.0
 * @category effects
 */
export const claim = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  limit: number,
  owner: string
): Effect.Effect<ReadonlyArray<Claim>, QueryError> =>
  limit <= 0
    ? Effect.succeed([])
    : Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.map(
        connection.query<{ work_unit_key: string; id: string }>(
          `SELECT work_unit_key, id FROM ${calls(schema).claim}`,
          [limit, owner, 0, now]
        ),
        (rows) => rows.map((row) => ({ workUnitKey: row.work_unit_key, owner, id: row.id }))
      ))

/**
 * The stale cleanup statement: deletes ownership rows whose heartbeat is older than `$1` seconds, skipping
 * rows that another transaction has locked (`FOR UPDATE SKIP LOCKED`).
 *
 * @since 0.1.0
 * @category statements
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
 * @category effects
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
 * The next items of a claimed unit in id order (at most `limit`), skipping dead letters and stopping before the
 * first item that is not yet due by the `Clock` (its retry or its time is later: the rest of the unit waits with
 * it); none once the claim is no longer this worker's (fenced in the same statement).
 *
 * @since 0.1.0
 * @category effects
 */
export const nextItems = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim,
  limit: number
): Effect.Effect<ReadonlyArray<Item>, QueryError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.map(
      connection.query<{ id: string; task_type: string; payload: string; attempts: number }>(
        nextItemsSql(schema),
        [claim.workUnitKey, limit, claim.owner, claim.id, now]
      ),
      (rows) => rows.map((row) => itemOf(row, claim.workUnitKey))
    ))

const nextItemsSql = perSchema((schema) =>
  `SELECT i.id::text AS id, i.task_type, i.payload::text AS payload, i.attempts
         FROM (${unitItemsSql(schema, "$1", "$2", "$5")}) i
         WHERE EXISTS (SELECT 1 FROM ${tables(schema).sessions} s
                       WHERE s.work_unit_key = $1 AND s.owner = $3 AND s.id = $4::bigint)
         ORDER BY i.id`
)

/** An item from a row with its payload as jsonb text (always valid JSON). */
const itemOf = (
  row: { readonly id: string; readonly task_type: string; readonly payload: string; readonly attempts: number },
  workUnitKey: string
): Item => ({
  id: row.id,
  workUnitKey,
  taskType: row.task_type,
  payload: JSON.parse(row.payload) as unknown,
  attempts: row.attempts
})

/**
 * The outcome of one handled item: processed (`error` undefined), or marked with its error (failed for good);
 * with `retryAt`, left unprocessed with its error until that time (epoch milliseconds); with `dead`, a dead
 * letter (left unprocessed, never claimed, its unit's later items go on; see {@link replay}).
 *
 * @since 0.2.0
 * @category models
 */
export interface Outcome {
  readonly item: Item
  readonly error: string | undefined
  /**
   * Run the item again no earlier than this (epoch milliseconds); its unit waits with it.
   *
   * @since 0.3.0
   */
  readonly retryAt?: number | undefined
  /**
   * The item ran out of attempts: a dead letter.
   *
   * @since 0.3.0
   */
  readonly dead?: boolean | undefined
}

/**
 * What {@link record} did: whether the claim still held (false: a stale cleanup took the unit away) and how
 * many items it marked (an item already marked by someone else is not marked again).
 *
 * @since 0.2.0
 * @category models
 */
export interface Recorded {
  readonly owned: boolean
  readonly marked: number
}

/** The outcomes as the record statement's `$1`: a JSON array of `{ id, error, retry_at, dead }`. */
const outcomesJson = (outcomes: ReadonlyArray<Outcome>): string =>
  JSON.stringify(outcomes.map(({ dead, error, item, retryAt }) => ({
    id: item.id,
    error: error ?? null,
    retry_at: retryAt ?? null,
    dead: dead === true
  })))

/**
 * The record statements' check of the claim (owner `$3`, claim id `$5` of unit `$2`): with `$4` (release) it deletes
 * the ownership row (`released`), else bumps its heartbeat (`beat`); either returns a row only while the claim holds.
 */
const claimHeld = (sessions: string) =>
  `beat AS (
        UPDATE ${sessions} SET last_updated = now()
        WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint AND NOT $4::boolean RETURNING 1
      ), released AS (
        DELETE FROM ${sessions}
        WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint AND $4::boolean RETURNING 1
      )`

/** Whether the claim held: true when `beat` or `released` of {@link claimHeld} returned its row. */
const holds = "(EXISTS (SELECT 1 FROM beat) OR EXISTS (SELECT 1 FROM released))"

/**
 * The record statement of {@link record}: `$1` the outcomes (a JSON array of `{ id, error, retry_at, dead }`;
 * an outcome of only `{ id, error }`, as a previous release sends, is processed or failed as before), `$2` the
 * unit, `$3` the owner, `$4` release (else heartbeat), `$5` the claim id. Every outcome counts one attempt and
 * keeps its error as the item's `last_error`; a retry sets the item's `run_at`, a dead letter sets `dead_at`
 * and the time `infinity`; both leave it unprocessed. A retry also moves the unit's later items to its time
 * (those with no time or an earlier one): they could not run before it anyway, and so they leave the claim's
 * walk of untimed items (a waiting unit costs the claim nothing, however long its backlog) for the walk of
 * timed ones, which reaches them when they are due. Queue migration 8 installs it in the function
 * `queue_record` ({@link functions}, {@link recordBody}: a batch of done outcomes takes {@link recordDoneSql}),
 * which {@link record} calls: a change to it needs a new migration that replaces the function.
 *
 * @since 0.2.0
 * @category statements
 */
export const recordSql = (schema: SchemaName.SchemaName): string => {
  const { queue, sessions } = tables(schema)
  return `WITH outcome AS (
        SELECT (o ->> 'id')::bigint AS id, o ->> 'error' AS error,
               to_timestamp((o ->> 'retry_at')::float8 / 1000) AS retry_at,
               coalesce((o ->> 'dead')::boolean, false) AS dead,
               o ->> 'retry_at' IS NULL AND NOT coalesce((o ->> 'dead')::boolean, false) AS done
        FROM jsonb_array_elements($1::jsonb) AS o
      ), ${claimHeld(sessions)}, marked AS (
        UPDATE ${queue} q
        SET processed = outcome.done,
            error = CASE WHEN outcome.done THEN outcome.error END,
            attempts = q.attempts + 1,
            last_error = coalesce(outcome.error, q.last_error),
            run_at = CASE WHEN outcome.dead THEN 'infinity'::timestamptz ELSE coalesce(outcome.retry_at, q.run_at) END,
            dead_at = CASE WHEN outcome.dead THEN clock_timestamp() END,
            processed_by = CASE WHEN outcome.done THEN $3 END,
            processed_claim = CASE WHEN outcome.done THEN $5::bigint END,
            processed_at = CASE WHEN outcome.done THEN clock_timestamp() END
        FROM outcome
        WHERE q.id = outcome.id AND q.work_unit_key = $2 AND NOT q.processed AND q.dead_at IS NULL
          AND ${holds}
        RETURNING q.id
      ), retried AS (
        SELECT min(id) AS id, max(retry_at) AS retry_at FROM outcome WHERE retry_at IS NOT NULL
      ), held AS (
        UPDATE ${queue} q SET run_at = retried.retry_at
        FROM retried
        WHERE retried.id IS NOT NULL AND q.work_unit_key = $2 AND q.id > retried.id AND NOT q.processed
          AND q.dead_at IS NULL AND (q.run_at IS NULL OR q.run_at < retried.retry_at)
          AND ${holds}
        RETURNING 1
      ) SELECT ${holds} AS owned,
               (SELECT count(*) FROM marked)::int AS marked`
}

/**
 * The record statement of {@link recordSql} for a batch whose outcomes are all done (processed, with or without
 * an error: no retry, no dead letter), the common case: the same marks, ownership check and result, without the
 * retry's steps (the time it sets on the unit's later items). It costs about what the record cost before retries
 * existed. The function `queue_record_done` (queue migration 8) runs it alone, and {@link record} calls that for a
 * batch of done outcomes: the test of the outcomes in `queue_record` ({@link recordBody}), which a previous
 * release calls, cost a 10-item record about 10 µs.
 *
 * @since 0.3.0
 * @category statements
 */
export const recordDoneSql = (schema: SchemaName.SchemaName): string => {
  const { queue, sessions } = tables(schema)
  return `WITH outcome AS (
        SELECT (o ->> 'id')::bigint AS id, o ->> 'error' AS error FROM jsonb_array_elements($1::jsonb) AS o
      ), ${claimHeld(sessions)}, marked AS (
        UPDATE ${queue} q
        SET processed = true, error = outcome.error, attempts = q.attempts + 1,
            last_error = coalesce(outcome.error, q.last_error),
            processed_by = $3, processed_claim = $5::bigint, processed_at = clock_timestamp()
        FROM outcome
        WHERE q.id = outcome.id AND q.work_unit_key = $2 AND NOT q.processed AND q.dead_at IS NULL
          AND ${holds}
        RETURNING q.id
      ) SELECT ${holds} AS owned,
               (SELECT count(*) FROM marked)::int AS marked`
}

/**
 * The body of the function `queue_record` (queue migration 8): {@link recordDoneSql} when every outcome of `$1`
 * is done, else {@link recordSql}. Two statements, so each keeps a plan of its own; the test of `$1` is one
 * expression, not a query.
 *
 * @since 0.3.0
 * @category statements
 */
export const recordBody = (schema: SchemaName.SchemaName): string =>
  branchBody(
    "jsonb_path_exists($1, '$[*] ? (@.retry_at != null || @.dead == true)')",
    recordSql(schema),
    recordDoneSql(schema)
  )

/**
 * Records the outcomes of a batch of one unit's items in ONE statement: marks each item processed (with its
 * error, if any), due again later (a retry) or dead (see {@link Outcome}), and either bumps the unit's heartbeat or, with `release`, deletes the ownership row (the
 * unit looked drained), all only while the claim holds (owner and id, in the same statement): a worker that
 * lost its unit marks nothing. Each marked item keeps the owner, the claim id and the time of its mark
 * (`processed_by`, `processed_claim`, `processed_at`). Rows of other claims are never touched. An item handled but not yet recorded
 * when the process dies is handled again by the next owner (at-least-once).
 *
 * @since 0.2.0
 * @category effects
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
      allDone(outcomes) ? recordDoneCall(schema) : recordCall(schema),
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

const recordCall = perSchema((schema) => `SELECT owned, marked FROM ${calls(schema).record}`)
const recordDoneCall = perSchema((schema) => `SELECT owned, marked FROM ${calls(schema).recordDone}`)

/** Whether every outcome is done (processed, with or without an error): no retry, no dead letter. */
const allDone = (outcomes: ReadonlyArray<Outcome>): boolean =>
  outcomes.every((outcome) => outcome.retryAt === undefined && outcome.dead !== true)

/**
 * The statement of {@link recordAndClaim}: `queue_record` with `$1`–`$5` as in {@link recordSql}
 * (`queue_record_done` with `outcomes` "done": every outcome of `$1` is done, see {@link recordDoneSql}), then,
 * only when the claim still held, `queue_claim` of up to `$6` units for the same owner with `$7` items each, due
 * at `$8` (now, epoch milliseconds). Each function's statement runs on a snapshot of its own, so the claim sees
 * the record's release. One row per claimed unit, or one row with no unit.
 *
 * @since 0.2.0
 * @category statements
 */
export const recordAndClaimSql = (schema: SchemaName.SchemaName, outcomes: "done" | "any" = "any"): string => {
  const { claim } = functions(schema)
  return `SELECT r.owned, r.marked, c.work_unit_key, c.id, c.items
FROM ${outcomes === "done" ? calls(schema).recordDone : calls(schema).record} r
LEFT JOIN LATERAL ${claim}(CASE WHEN r.owned THEN $6::integer ELSE 0 END, $3::text, $7::integer, $8::float8) c ON true`
}

const recordAndClaimText = perSchema((schema) => recordAndClaimSql(schema, "any"))
const recordDoneAndClaimText = perSchema((schema) => recordAndClaimSql(schema, "done"))

/**
 * {@link record}, then the claim of up to `limit` more units for the same owner, with the first `batchSize`
 * items of each (as {@link claimWithItems}), in ONE statement and one transaction: a worker that finishes a
 * unit takes its next one in the same round trip. Nothing is claimed when the record found the claim gone.
 *
 * @since 0.2.0
 * @category effects
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
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.map(
      connection.query<
        { owned: boolean; marked: number; work_unit_key: string | null; id: string | null; items: string | null }
      >(allDone(outcomes) ? recordDoneAndClaimText(schema) : recordAndClaimText(schema), [
        outcomesJson(outcomes),
        claim.workUnitKey,
        claim.owner,
        release,
        claim.id,
        limit,
        batchSize,
        now
      ]),
      (rows) => ({
        recorded: { owned: rows[0]?.owned === true, marked: rows[0]?.marked ?? 0 },
        claimed: rows.flatMap(({ id, items, work_unit_key }) =>
          work_unit_key === null || id === null || items === null
            ? []
            : [claimedOf({ work_unit_key, id, items }, claim.owner)]
        )
      })
    ))

/**
 * Bumps a claim's heartbeat; returns whether the claim still holds.
 *
 * @since 0.1.0
 * @category effects
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
 * @category effects
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
 * @category effects
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
 * @category effects
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
export const depthSql = (schema: SchemaName.SchemaName): string => {
  const { queue } = tables(schema)
  const now = at("$2")
  return `SELECT
  (SELECT count(*) FROM (SELECT 1 FROM ${queue} WHERE NOT processed AND run_at IS NULL LIMIT $1) r)::int AS ready,
  (SELECT count(*) FROM (SELECT 1 FROM ${queue} WHERE NOT processed AND run_at <= ${now} LIMIT $1) d)::int AS due,
  (SELECT count(*) FROM (
     SELECT 1 FROM ${queue} WHERE NOT processed AND run_at > ${now} AND run_at < 'infinity' LIMIT $1
   ) w)::int AS waiting,
  (extract(epoch FROM least(
     (SELECT created_at FROM ${queue} WHERE NOT processed AND run_at IS NULL ORDER BY id LIMIT 1),
     (SELECT run_at FROM ${queue} WHERE NOT processed AND run_at <= ${now} ORDER BY run_at, id LIMIT 1)
   )) * 1000)::float8 AS oldest_due_at`
}

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
): Effect.Effect<Depth, QueryError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) =>
    Effect.map(
      connection.query<{ ready: number; due: number; waiting: number; oldest_due_at: number | null }>(
        depthSql(schema),
        [cap, now]
      ),
      (rows) => {
        const row = rows[0]
        return {
          due: Math.min(cap, Number(row?.ready ?? 0) + Number(row?.due ?? 0)),
          waiting: Number(row?.waiting ?? 0),
          oldestDueAt: row?.oldest_due_at === null || row?.oldest_due_at === undefined
            ? null
            : Number(row.oldest_due_at)
        }
      }
    ))

/**
 * A dead letter: an item whose handler ran out of attempts. It stays unprocessed and is never claimed (its
 * unit's later items go on) until it is {@link replay}ed.
 *
 * @since 0.3.0
 * @category models
 */
export interface DeadLetter {
  readonly id: string
  readonly workUnitKey: string
  readonly taskType: string
  readonly payload: unknown
  readonly attempts: number
  /** The error of its last attempt. */
  readonly lastError: string | null
  /** When it died (epoch milliseconds). */
  readonly deadAt: number
}

/**
 * Which dead letters a listing or a replay means: one item, a unit's, a task type's, or all.
 *
 * @since 0.3.0
 * @category models
 */
export type DeadLetterSelector =
  | { readonly _tag: "Item"; readonly id: string }
  | { readonly _tag: "Unit"; readonly workUnitKey: string }
  | { readonly _tag: "TaskType"; readonly taskType: string }
  | { readonly _tag: "All" }

/** The selector as a condition on `q` with its parameter in `$n`. */
const selects = (selector: DeadLetterSelector, n: number): { readonly where: string; readonly value: unknown } => {
  switch (selector._tag) {
    case "Item":
      return { where: `q.id = $${n}::bigint`, value: selector.id }
    case "Unit":
      return { where: `q.work_unit_key = $${n}::text`, value: selector.workUnitKey }
    case "TaskType":
      return { where: `q.task_type = $${n}::text`, value: selector.taskType }
    case "All":
      return { where: `$${n}::text IS NULL`, value: null }
  }
}

/**
 * Lists up to `limit` dead letters that `selector` names, oldest first (through the partial index
 * `queue_dead_idx`).
 *
 * @since 0.3.0
 * @category effects
 */
export const deadLetters = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector,
  limit: number
): Effect.Effect<ReadonlyArray<DeadLetter>, QueryError> => {
  const { value, where } = selects(selector, 1)
  return Effect.map(
    connection.query<
      {
        id: string
        work_unit_key: string
        task_type: string
        payload: string
        attempts: number
        last_error: string | null
        dead_at: number
      }
    >(
      `SELECT q.id::text AS id, q.work_unit_key, q.task_type, q.payload::text AS payload, q.attempts, q.last_error,
              (extract(epoch FROM q.dead_at) * 1000)::float8 AS dead_at
       FROM ${tables(schema).queue} q
       WHERE q.dead_at IS NOT NULL AND NOT q.processed AND ${where}
       ORDER BY q.id LIMIT $2`,
      [value, limit]
    ),
    (rows) =>
      rows.map((row) => ({
        ...itemOf(row, row.work_unit_key),
        attempts: row.attempts,
        lastError: row.last_error,
        deadAt: row.dead_at
      }))
  )
}

/**
 * Dead letters by task type (for the queue status and metrics).
 *
 * @since 0.3.0
 * @category effects
 */
export const deadLetterCounts = (
  connection: Connection,
  schema: SchemaName.SchemaName
): Effect.Effect<ReadonlyMap<string, number>, QueryError> =>
  Effect.map(
    connection.query<{ task_type: string; n: number }>(
      `SELECT q.task_type, count(*)::int AS n FROM ${tables(schema).queue} q
       WHERE q.dead_at IS NOT NULL AND NOT q.processed GROUP BY 1 ORDER BY 1`
    ),
    (rows) => new Map(rows.map((row) => [row.task_type, row.n]))
  )

/**
 * Replays the dead letters that `selector` names: back to pending, due at once, attempts reset (the last error
 * stays until the next attempt). Returns how many. A replayed item runs again in its unit's order: before its
 * unit's live items with later ids, after the ones that went on while it was dead.
 *
 * @since 0.3.0
 * @category effects
 */
export const replay = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector
): Effect.Effect<number, QueryError> => {
  const { value, where } = selects(selector, 1)
  return Effect.map(
    connection.query(
      `UPDATE ${tables(schema).queue} q SET dead_at = NULL, run_at = NULL, attempts = 0
       WHERE q.dead_at IS NOT NULL AND NOT q.processed AND ${where} RETURNING 1`,
      [value]
    ),
    (rows) => rows.length
  )
}
