/**
 * Queue migrations 2–6 (released in 0.1.0 and 0.2.0; frozen): the indexes the claim, the drain, the stale cleanup
 * and the history retention read, and who completed each item.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import { names } from "../Names.ts"

export const migrations: ReadonlyArray<Migrator.Migration> = [
  {
    version: 2,
    name: "partial index of unprocessed items",
    // The claim's probe of a unit's first live item and the drain of a unit read only unprocessed rows.
    up: (schema) => [
      `CREATE INDEX queue_unprocessed_idx ON ${names(schema).queue} (work_unit_key, id)
        WHERE NOT processed`
    ]
  },
  {
    version: 3,
    name: "ownership heartbeat index",
    up: (schema) => [
      `CREATE INDEX active_queue_sessions_last_updated_idx
        ON ${names(schema).sessions} (last_updated)`
    ]
  },
  {
    version: 4,
    name: "partial index of processed items by age",
    up: (schema) => [
      `CREATE INDEX queue_processed_created_at_idx ON ${names(schema).queue} (created_at)
        WHERE processed`
    ]
  },
  {
    version: 5,
    name: "who completed each item",
    // Written by the record with the mark: the owner and the claim (the fencing token) it acted for, and the time
    // of the mark; what a consistency checker needs to show that no item was completed by a worker that no longer
    // owned its unit. Nullable: items marked before this migration have none.
    up: (schema) => [
      `ALTER TABLE ${names(schema).queue}
        ADD COLUMN processed_by text, ADD COLUMN processed_claim bigint, ADD COLUMN processed_at timestamptz`
    ]
  },
  {
    version: 6,
    name: "partial index of unprocessed items by id",
    // The 0.2.0 claim's walk in id order; migration 8's claim walks queue_ready_id_idx and queue_run_at_idx.
    up: (schema) => [
      `CREATE INDEX queue_pending_id_idx ON ${names(schema).queue} (id) WHERE NOT processed`
    ]
  }
]
