/**
 * The queue's hot path: the statements a deriver's worker sends for a claimed unit. The claim of units with their
 * first batches (`queue_claim`), the read of a unit's later batches, the record of a batch's outcomes with the
 * heartbeat or the release (`queue_record`, `queue_record_done`), the record that claims the next unit along, the
 * heartbeat and the releases. Every function runs on a `Connection` that the caller checked out (one checkout per
 * poll, per batch read, per batch record), so the caller decides what shares a transaction.
 *
 * The claim and record statements live in the functions that queue migration 8 installs, each one text in
 * `src/internal/migrations/0008-retries.ts` (on a server: `\\sf tenant.queue_claim`); what is sent here is their
 * call. Enqueueing is {@link Enqueue}, the maintenance statements {@link Maintenance}, the dead letters
 * {@link DeadLetters}.
 *
 * @since 0.1.0
 */
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import type { SchemaName } from "@resilience/schema"
import { Clock, Effect } from "effect"
import * as Enqueue from "./Enqueue.ts"
import { names, perSchema } from "./internal/Names.ts"
import { forRows, itemOf, query } from "./internal/Rows.ts"
import { type ClaimedItems, decode } from "./internal/RowSchemas.ts"
import * as Maintenance from "./Maintenance.ts"

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
 * The error type of every statement here. A row of the wrong shape (each statement's rows pass one `Schema` of
 * its row) is a `QueryFailed` with no SQLSTATE whose message names the statement and the field.
 *
 * @since 0.1.0
 * @category models
 */
export type QueryError = QueryFailed | DatabaseUnavailable

/**
 * The names of the functions that queue migration 7 made and migration 8 replaced with new bodies
 * (`queue_claim`, `queue_record`, in the tenant schema), and the one migration 8 added for the common record
 * (`queue_record_done`). A unit's two statements call them instead of sending
 * their text: PL/pgSQL keeps each statement's plan for the life of the server connection, so the server plans
 * them once per connection, not on every call, with no named prepared statement on the wire (PgBouncer in
 * transaction mode before 1.21 cannot carry those). The measurements are in docs/results/deriver-throughput.md.
 *
 * @since 0.2.0
 * @category decisions
 */
export const functions = (
  schema: SchemaName.SchemaName
): { readonly claim: string; readonly record: string; readonly recordDone: string } => {
  const { claim, record, recordDone } = names(schema)
  /** `recordDone`: `queue_record` for a batch whose outcomes are all done (since 0.3.0). */
  return { claim, record, recordDone }
}

/**
 * The calls a unit's statements send: `queue_claim($1 limit, $2 owner, $3 batch size, $4 now, 0)` (`now` in epoch
 * milliseconds, from the deriver's `Clock`: what "due" means; 0: its walk of untimed items from the start) and
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
    claim: `${claim}($1::integer, $2::text, $3::integer, $4::float8, 0)`,
    record: `${record}${recordArguments}`,
    /** The record of a batch whose outcomes are all done, with the same arguments (since 0.3.0). */
    recordDone: `${recordDone}${recordArguments}`
  }
}

/**
 * Claims up to `limit` work units for `owner` with the first `batchSize` due items of each (the function `queue_claim`), oldest first; "due" by the `Clock`.
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
      query(
        connection,
        claimWithItemsCall(schema),
        [limit, owner, batchSize, now],
        (rows) => rows.map((row) => claimedOf(decode.claim.row(row), owner, decode.claim.items))
      ))

const claimWithItemsCall = perSchema(({ claim }) =>
  `SELECT work_unit_key, id, items FROM ${claim}($1::integer, $2::text, $3::integer, $4::float8, 0)`
)

/**
 * A claimed unit with its first batch, from a decoded row of `queue_claim` (items as JSON text, decoded by `itemsOf`,
 * the statement's decoder): the items before the first that is not yet due (the rest of the unit waits with it).
 */
const claimedOf = (
  row: { readonly work_unit_key: string; readonly id: string; readonly items: string },
  owner: string,
  itemsOf: (text: string) => typeof ClaimedItems.Type
): { readonly claim: Claim; readonly items: ReadonlyArray<Item> } => {
  const batch = itemsOf(row.items)
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
 * A poll: {@link claimWithItems}, and when it claims nothing, the time of the earliest item waiting for a time after
 * now (epoch milliseconds: a retry's, or the time it was enqueued with), in the same statement (the function
 * `queue_poll`, queue migration 9): what the deriver wakes at instead of its schedule's next poll.
 *
 * @since 0.3.0
 * @category effects
 */
export const poll = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  limit: number,
  owner: string,
  batchSize: number
): Effect.Effect<
  {
    readonly claimed: ReadonlyArray<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }>
    readonly nextAt: number | undefined
  },
  QueryError
> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) =>
      query(connection, pollCall(schema), [limit, owner, batchSize, now], (rows) => {
        const claimed: Array<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }> = []
        let nextAt: number | undefined = undefined
        for (const row of rows) {
          const { id, items, next_at, work_unit_key } = decode.poll.row(row)
          if (work_unit_key !== null && id !== null && items !== null) {
            claimed.push(claimedOf({ work_unit_key, id, items }, owner, decode.poll.items))
          } else if (next_at !== null) nextAt = next_at.getTime()
        }
        return { claimed, nextAt }
      })
  )

const pollCall = perSchema(({ poll }) =>
  `SELECT work_unit_key, id, items, next_at FROM ${poll}($1::integer, $2::text, $3::integer, $4::float8)`
)

/**
 * Claims up to `limit` work units for `owner` ("due" by the `Clock`); returns the {@link Claim}s, oldest first:
 * {@link claimWithItems} with no items per unit.
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
  Effect.map(claimWithItems(connection, schema, limit, owner, 0), (claimed) => claimed.map(({ claim }) => claim))

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
    query(
      connection,
      nextItemsSql(schema),
      [claim.workUnitKey, limit, claim.owner, claim.id, now],
      (rows) => rows.map((row) => itemOf(decode.nextItems.row(row), claim.workUnitKey, decode.nextItems.payload))
    ))

/**
 * The read of a unit's next batch: `$1` the unit, `$2` the batch size, `$3` the owner, `$4` the claim id, `$5` now
 * (epoch milliseconds). Its live items in id order, up to (not including) the first whose time is after now: a
 * unit is handled in order, so an item waiting for its time holds back the rest. Nothing once the claim is gone.
 */
const nextItemsSql = perSchema(({ queue, sessions }) =>
  `SELECT w.id::text AS id, w.task_type, w.payload::text AS payload, w.attempts
FROM (
  SELECT b.*, bool_or(b.run_at > to_timestamp($5::float8 / 1000)) OVER (ORDER BY b.id) AS held
  FROM (
    SELECT q.id, q.task_type, q.payload, q.attempts, q.run_at FROM ${queue} q
    WHERE q.work_unit_key = $1 AND NOT q.processed AND q.dead_at IS NULL
    ORDER BY q.id LIMIT $2
  ) b
) w
WHERE w.held IS NOT TRUE
  AND EXISTS (SELECT 1 FROM ${sessions} s WHERE s.work_unit_key = $1 AND s.owner = $3 AND s.id = $4::bigint)
ORDER BY w.id`
)

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

/** The record functions' arguments: outcomes, unit, owner, release, claim id. */
const recordArguments = "($1::jsonb, $2::text, $3::text, $4::boolean, $5::bigint)"

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
  allDone(outcomes)
    ? query(connection, recordDoneCall(schema), recordParameters(claim, outcomes, release), readRecordDone)
    : query(connection, recordCall(schema), recordParameters(claim, outcomes, release), readRecord)

/** The record functions' parameters (`$1`–`$5`). */
const recordParameters = (claim: Claim, outcomes: ReadonlyArray<Outcome>, release: boolean) => [
  outcomesJson(outcomes),
  claim.workUnitKey,
  claim.owner,
  release,
  claim.id
]

/** What a record statement returned in its first row, decoded (none: nothing owned, nothing marked). */
const recordedFrom = (row: Recorded | undefined): Recorded => ({ owned: row?.owned === true, marked: row?.marked ?? 0 })

/** What a record statement returned, by its decoder. */
const recordedOf = (decodeRow: (row: unknown) => Recorded) => (rows: ReadonlyArray<unknown>): Recorded =>
  recordedFrom(rows.length === 0 ? undefined : decodeRow(rows[0]))
const readRecord = recordedOf(decode.record)
const readRecordDone = recordedOf(decode.recordDone)

const recordCall = perSchema(({ record }) => `SELECT owned, marked FROM ${record}${recordArguments}`)
const recordDoneCall = perSchema(({ recordDone }) => `SELECT owned, marked FROM ${recordDone}${recordArguments}`)

/**
 * Whether every outcome is done (processed, with or without an error): no retry, no dead letter. Such a batch
 * can go through {@link recordUnits}.
 *
 * @since 0.3.0
 * @category predicates
 */
export const allDone = (outcomes: ReadonlyArray<Outcome>): boolean =>
  outcomes.every((outcome) => outcome.retryAt === undefined && outcome.dead !== true)

/**
 * The statement of {@link recordAndClaim}: `queue_record` with `$1`–`$5` as in {@link calls}
 * (`queue_record_done` with `outcomes` "done": every outcome of `$1` is done), then,
 * only when the claim still held, `queue_claim` of up to `$6` units for the same owner with `$7` items each, due
 * at `$8` (now, epoch milliseconds). Each function's statement runs on a snapshot of its own, so the claim sees
 * the record's release. One row per claimed unit, or one row with no unit.
 *
 * @since 0.2.0
 * @category statements
 */
export const recordAndClaimSql = (schema: SchemaName.SchemaName, outcomes: "done" | "any" = "any"): string => {
  const { claim } = names(schema)
  return `SELECT r.owned, r.marked, c.work_unit_key, c.id, c.items
FROM ${outcomes === "done" ? calls(schema).recordDone : calls(schema).record} r
LEFT JOIN LATERAL ${claim}(CASE WHEN r.owned THEN $6::integer ELSE 0 END, $3::text, $7::integer, $8::float8, 0) c ON true`
}

const recordAndClaimText = perSchema((_, schema) => recordAndClaimSql(schema, "any"))
const recordDoneAndClaimText = perSchema((_, schema) => recordAndClaimSql(schema, "done"))
/**
 * What a record that claims along returns: what it recorded and the units it claimed, each with its first batch.
 *
 * @since 0.3.0
 * @category models
 */
export interface RecordedAndClaimed<A> {
  readonly recorded: A
  readonly claimed: ReadonlyArray<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }>
}

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
): Effect.Effect<RecordedAndClaimed<Recorded>, QueryError> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const done = allDone(outcomes)
    const decoders = done ? decode.recordDoneAndClaim : decode.recordAndClaim
    return query(
      connection,
      done ? recordDoneAndClaimText(schema) : recordAndClaimText(schema),
      [...recordParameters(claim, outcomes, release), limit, batchSize, now],
      (rows) => {
        const decoded = rows.map(decoders.row)
        return {
          recorded: recordedFrom(decoded[0]),
          claimed: decoded.flatMap(({ id, items, work_unit_key }) =>
            work_unit_key === null || id === null || items === null
              ? []
              : [claimedOf({ work_unit_key, id, items }, claim.owner, decoders.items)]
          )
        }
      }
    )
  })

/**
 * One unit's part of {@link recordUnits}: its claim, its outcomes (every one done: processed, with or without an
 * error) and whether the record releases the unit (else it bumps the heartbeat).
 *
 * @since 0.3.0
 * @category models
 */
export interface UnitRecord {
  readonly claim: Claim
  readonly outcomes: ReadonlyArray<Outcome>
  readonly release: boolean
}

/**
 * Records many units of one owner in ONE statement (the function `queue_record_units`, queue migration 9): per unit,
 * as {@link record} does for a batch of done outcomes (only while its claim holds), then the claim of up to `limit`
 * more units for the owner with the first `batchSize` items of each, as {@link claimWithItems}. Returns each unit's
 * {@link Recorded}, by work-unit key, and the claims. Every outcome must be done: a retry or a dead letter goes
 * through {@link record}. All units must have the same owner. The claim's walk of untimed items starts after the item
 * id `after` ("0", the default: from the start; a unit whose first item is at or before it is not claimed).
 *
 * @since 0.3.0
 * @category effects
 */
export const recordUnits = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  owner: string,
  units: ReadonlyArray<UnitRecord>,
  limit: number,
  batchSize: number,
  after = "0"
): Effect.Effect<RecordedAndClaimed<ReadonlyMap<string, Recorded>>, QueryError> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (now) =>
      query(connection, recordUnitsCall(schema), [unitsJson(units), owner, limit, batchSize, now, after], (rows) => {
        const recorded = new Map<string, Recorded>()
        const claimed: Array<{ readonly claim: Claim; readonly items: ReadonlyArray<Item> }> = []
        for (const row of rows) {
          const { id, items, marked, owned, work_unit_key } = decode.recordUnits.row(row)
          if (id !== null && items !== null) {
            claimed.push(claimedOf({ work_unit_key, id, items }, owner, decode.recordUnits.items))
          } else recorded.set(work_unit_key, { owned: owned === true, marked: marked ?? 0 })
        }
        return { recorded, claimed }
      })
  )

const recordUnitsCall = perSchema(({ recordUnits }) =>
  `SELECT work_unit_key, owned, marked, id, items
FROM ${recordUnits}($1::jsonb, $2::text, $3::integer, $4::integer, $5::float8, $6::bigint)`
)

/** The units as `queue_record_units`'s `$1`: a JSON array of `{ unit, claim, release, outcomes: [{ id, error }] }`. */
const unitsJson = (units: ReadonlyArray<UnitRecord>): string =>
  JSON.stringify(units.map(({ claim, outcomes, release }) => ({
    unit: claim.workUnitKey,
    claim: claim.id,
    release,
    outcomes: outcomes.map(({ error, item }) => ({ id: item.id, error: error ?? null }))
  })))

/**
 * Bumps the heartbeats of many claims of `owner` in one statement; returns the ids of the claims that still hold
 * (a claim missing from it was taken over by a stale cleanup). A claim's id names its ownership row alone: a unit
 * claimed again gets a new id, so an older claim of the same unit renews nothing.
 *
 * @since 0.3.0
 * @category effects
 */
export const heartbeats = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  owner: string,
  claims: ReadonlyArray<Claim>
): Effect.Effect<ReadonlySet<string>, QueryError> =>
  claims.length === 0
    ? Effect.succeed(new Set())
    : query(
      connection,
      `UPDATE ${names(schema).sessions} SET last_updated = now()
       WHERE id = ANY(ARRAY(SELECT jsonb_array_elements_text($1::jsonb)::bigint)) AND owner = $2
       RETURNING id::text AS id`,
      [JSON.stringify(claims.map((claim) => claim.id)), owner],
      (rows) => new Set(rows.map((row) => decode.heartbeats(row).id))
    )

/**
 * Bumps a claim's heartbeat; returns whether the claim still holds: {@link heartbeats} of the one claim.
 *
 * @since 0.1.0
 * @category effects
 */
export const heartbeat = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  claim: Claim
): Effect.Effect<boolean, QueryError> =>
  Effect.map(heartbeats(connection, schema, claim.owner, [claim]), (renewed) => renewed.has(claim.id))

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
    `DELETE FROM ${names(schema).sessions} s
     USING jsonb_to_recordset($1::jsonb) AS c(work_unit_key text, owner text, id text)
     WHERE s.work_unit_key = c.work_unit_key AND s.owner = c.owner AND s.id = c.id::bigint
     RETURNING 1`,
    decode.release
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
  query(
    connection,
    `DELETE FROM ${names(schema).sessions} WHERE owner = $1 RETURNING 1`,
    [owner],
    decode.releaseOwner
  )

/**
 * Moved to {@link Enqueue.enqueue}.
 *
 * @deprecated Since 0.3.0: use `Enqueue.enqueue`; this alias goes in 0.4.0.
 * @since 0.1.0
 * @category effects
 */
export const enqueue: typeof Enqueue.enqueue = Enqueue.enqueue

/**
 * Moved to {@link Enqueue.NewItem}.
 *
 * @deprecated Since 0.3.0: use `Enqueue.NewItem`; this alias goes in 0.4.0.
 * @since 0.1.0
 * @category models
 */
export type NewItem = Enqueue.NewItem

/**
 * Moved to {@link Maintenance.cleanupStale}.
 *
 * @deprecated Since 0.3.0: use `Maintenance.cleanupStale`; this alias goes in 0.4.0.
 * @since 0.1.0
 * @category effects
 */
export const cleanupStale: typeof Maintenance.cleanupStale = Maintenance.cleanupStale

/**
 * Moved to {@link Maintenance.cleanupStaleSql}.
 *
 * @deprecated Since 0.3.0: use `Maintenance.cleanupStaleSql`; this alias goes in 0.4.0.
 * @since 0.1.0
 * @category statements
 */
export const cleanupStaleSql: typeof Maintenance.cleanupStaleSql = Maintenance.cleanupStaleSql

/**
 * Moved to {@link Maintenance.pruneHistory}.
 *
 * @deprecated Since 0.3.0: use `Maintenance.pruneHistory`; this alias goes in 0.4.0.
 * @since 0.2.0
 * @category effects
 */
export const pruneHistory: typeof Maintenance.pruneHistory = Maintenance.pruneHistory
