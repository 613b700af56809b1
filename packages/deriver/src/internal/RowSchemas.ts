/**
 * The row of every statement the deriver sends, one `Schema` each, and its decoders, built once here: a row of the
 * wrong shape fails the statement with `QueryFailed` naming the statement and the field (see `Rows.query`). The
 * schemas describe what the `pg` and `postgres` drivers return: `bigint` ids as text (`::text` in the statement),
 * `integer` as a number, `float8` as a number, `timestamptz` as a `Date`, `jsonb::text` and `json_agg(…)::text` as
 * text that is parsed once (its items checked, a payload kept `unknown`).
 *
 * @internal
 */
import { Schema } from "effect"
import { countOf, decoder, jsonOf } from "./Rows.ts"

/** An item of a claimed unit's first batch, in `queue_claim`'s `items` (a JSON array): `later` null when untimed. */
export const ClaimedItem = Schema.Struct({
  id: Schema.String,
  task_type: Schema.String,
  payload: Schema.Unknown,
  attempts: Schema.Int,
  later: Schema.NullOr(Schema.Boolean)
})

/** `queue_claim`'s `items`, parsed. */
export const ClaimedItems = Schema.Array(ClaimedItem)

/** A claimed unit: a row of `queue_claim` (`items` the JSON text of {@link ClaimedItems}). */
export const ClaimRow = Schema.Struct({ work_unit_key: Schema.String, id: Schema.String, items: Schema.String })

/** A row of `queue_poll`: a claimed unit (`next_at` null), or the one row of the earliest time when none was. */
export const PollRow = Schema.Struct({
  work_unit_key: Schema.NullOr(Schema.String),
  id: Schema.NullOr(Schema.String),
  items: Schema.NullOr(Schema.String),
  next_at: Schema.NullOr(Schema.Date)
})

/** The row of `queue_record` and `queue_record_done`. */
export const RecordRow = Schema.Struct({ owned: Schema.Boolean, marked: Schema.Int })

/** A row of a record that claims along: the record's, and a claimed unit or none (nulls). */
export const RecordAndClaimRow = Schema.Struct({
  ...RecordRow.fields,
  work_unit_key: Schema.NullOr(Schema.String),
  id: Schema.NullOr(Schema.String),
  items: Schema.NullOr(Schema.String)
})

/** A row of `queue_record_units`: a unit's record (`id`, `items` null) or a claimed unit (`owned`, `marked` null). */
export const RecordUnitsRow = Schema.Struct({
  work_unit_key: Schema.String,
  owned: Schema.NullOr(Schema.Boolean),
  marked: Schema.NullOr(Schema.Int),
  id: Schema.NullOr(Schema.String),
  items: Schema.NullOr(Schema.String)
})

/** A row of the next-items read: an item, its payload as `jsonb::text`. */
export const ItemRow = Schema.Struct({
  id: Schema.String,
  task_type: Schema.String,
  payload: Schema.String,
  attempts: Schema.Int
})

/** A row of the dead-letter listing: an item with its unit, last error and time of death (epoch milliseconds). */
export const DeadLetterRow = Schema.Struct({
  ...ItemRow.fields,
  work_unit_key: Schema.String,
  last_error: Schema.NullOr(Schema.String),
  dead_at: Schema.Number
})

/** The row of the dead letters by task type. */
export const DeadLetterCountRow = Schema.Struct({ task_type: Schema.String, n: Schema.Int })

/** The row of the enqueue: how many items it inserted. */
export const EnqueuedRow = Schema.Struct({ n: Schema.Int })

/** A row of the stale cleanup: a freed unit. */
export const FreedRow = Schema.Struct({ work_unit_key: Schema.String })

/** The row of the depth sample (see `Maintenance.depthSql`). */
export const DepthRow = Schema.Struct({
  ready: Schema.Int,
  due: Schema.Int,
  waiting: Schema.Int,
  oldest_due_at: Schema.NullOr(Schema.Number)
})

/** A row of the heartbeat of many claims: a claim whose ownership row it renewed. */
export const RenewedRow = Schema.Struct({ id: Schema.String })

/** A row of a statement that returns `1` per row it touched (`RETURNING 1`): only their count is read. */
export const TouchedRow = Schema.Struct({ "?column?": Schema.Literal(1) })

/** The decoders of a statement that returns claimed units: its rows, and each unit's `items` (parsed, then checked). */
const claiming = <S extends Schema.ConstraintDecoder<unknown>>(statement: string, row: S) => {
  const parse = jsonOf(statement, "items")
  const decode = decoder(statement, ClaimedItems, "items")
  return { row: decoder(statement, row), items: (text: string) => decode(parse(text)) }
}

/** The decoders of a statement that returns items: its rows, and each item's `payload` (parsed, kept `unknown`). */
const items = <S extends Schema.ConstraintDecoder<unknown>>(statement: string, row: S) => ({
  row: decoder(statement, row),
  payload: jsonOf(statement, "payload")
})

/** The count of a statement's {@link TouchedRow}s. */
const touched = (statement: string) => countOf(decoder(statement, TouchedRow))

/**
 * Each statement's decoders, named as its failures name it: the function that sends it and, for a call, the server
 * function it calls.
 */
export const decode = {
  claim: claiming("Queue.claimWithItems (queue_claim)", ClaimRow),
  poll: claiming("Queue.poll (queue_poll)", PollRow),
  record: decoder("Queue.record (queue_record)", RecordRow),
  recordDone: decoder("Queue.record (queue_record_done)", RecordRow),
  recordAndClaim: claiming("Queue.recordAndClaim (queue_record, queue_claim)", RecordAndClaimRow),
  recordDoneAndClaim: claiming("Queue.recordAndClaim (queue_record_done, queue_claim)", RecordAndClaimRow),
  recordUnits: claiming("Queue.recordUnits (queue_record_units)", RecordUnitsRow),
  nextItems: items("Queue.nextItems", ItemRow),
  heartbeats: decoder("Queue.heartbeats", RenewedRow),
  release: touched("Queue.release"),
  releaseOwner: touched("Queue.releaseOwner"),
  enqueue: decoder("Enqueue.enqueue", EnqueuedRow),
  cleanupStale: decoder("Maintenance.cleanupStale", FreedRow),
  pruneHistory: touched("Maintenance.pruneHistory"),
  depth: decoder("Maintenance.depth", DepthRow),
  deadLetters: items("DeadLetters.list", DeadLetterRow),
  deadLetterCounts: decoder("DeadLetters.counts", DeadLetterCountRow),
  replay: touched("DeadLetters.replay")
}
