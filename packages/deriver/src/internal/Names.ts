/**
 * The qualified names of the queue's tables and functions in one tenant schema, and a statement text made once per
 * schema. Every SQL text of the queue (its migrations and the statements the deriver sends) names its objects
 * through these.
 *
 * @internal
 */
import { Migrator, SchemaName } from "@resilience/schema"

/** The queue's objects in one schema, quoted and qualified. */
export interface Names {
  /** The items. */
  readonly queue: string
  /** The ownership rows (one per claimed unit; unique work-unit key). */
  readonly sessions: string
  /** `queue_claim`: the claim with each unit's first batch (migrations 7 and 8). */
  readonly claim: string
  /** `queue_record`: a unit's outcomes, with its heartbeat or its release (migrations 7 and 8). */
  readonly record: string
  /** `queue_record_done`: `queue_record` for a batch whose outcomes are all done (migration 8). */
  readonly recordDone: string
  /** `queue_record_units`: the done outcomes of many units, their heartbeats or releases, then a claim (migration 9). */
  readonly recordUnits: string
  /** `queue_poll`: the poll's claim, and the time of the earliest item waiting for its time when none is claimed (migration 9). */
  readonly poll: string
}

/** The queue's objects in `schema`. */
export const names = (schema: SchemaName.SchemaName): Names => ({
  queue: SchemaName.qualify(schema, "queue"),
  sessions: SchemaName.qualify(schema, "active_queue_sessions"),
  claim: SchemaName.qualify(schema, "queue_claim"),
  record: SchemaName.qualify(schema, "queue_record"),
  recordDone: SchemaName.qualify(schema, "queue_record_done"),
  recordUnits: SchemaName.qualify(schema, "queue_record_units"),
  poll: SchemaName.qualify(schema, "queue_poll")
})

/**
 * A statement text made once per schema: the texts a unit sends are the same for every unit of a schema, and
 * quoting and qualifying them again cost the deriver's loop about 5 µs per item. One entry per schema the process
 * uses.
 */
export const perSchema = (
  make: (names: Names, schema: SchemaName.SchemaName) => string
): (schema: SchemaName.SchemaName) => string => {
  const made = new Map<string, string>()
  return (schema) => {
    let text = made.get(schema)
    if (text === undefined) {
      text = make(names(schema), schema)
      made.set(schema, text)
    }
    return text
  }
}

/** Queue migration `version`, `name`: its statements, written from a schema's queue names. */
export const migration = Migrator.withNames(names)
