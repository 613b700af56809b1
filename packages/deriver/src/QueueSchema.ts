/**
 * The queue's tables, indexes and functions in a tenant schema, as versioned migrations for `Migrator` of
 * `@resilience/schema`. Each migration's SQL is one text in its own file under `src/internal/migrations/`; a released
 * migration never changes (packages/domain/test/ReleasedMigrations.test.ts fails when one does).
 *
 * @since 0.1.0
 */
import type { Migrator } from "@resilience/schema"
import * as Tables from "./internal/migrations/0001-tables.ts"
import * as Indexes from "./internal/migrations/0002-6-indexes.ts"
import * as Functions from "./internal/migrations/0007-functions.ts"
import * as Retries from "./internal/migrations/0008-retries.ts"
import * as RecordUnits from "./internal/migrations/0009-record-units.ts"

/**
 * The queue's migrations:
 *
 * 1. `queue` (id, work_unit_key, task_type, payload jsonb, processed, error, created_at) and
 *    `active_queue_sessions` (id, unique work_unit_key, owner, last_updated): the ownership table whose
 *    unique key makes a claim exclusive across instances.
 * 2. The partial index `queue_unprocessed_idx (work_unit_key, id) WHERE NOT processed`: the claim and the
 *    drain of a unit read only unprocessed rows, so their cost follows the backlog, not the history.
 * 3. `active_queue_sessions_last_updated_idx` for the stale cleanup.
 * 4. The partial index `queue_processed_created_at_idx (created_at) WHERE processed`: the history retention
 *    finds expired processed rows without reading the backlog or the rest of the history.
 * 5. Who completed each item (`processed_by`, `processed_claim`, `processed_at`).
 * 6. The partial index `queue_pending_id_idx (id) WHERE NOT processed`: the claim walks the backlog in id
 *    order and stops after the units it takes, instead of grouping the whole backlog per claim.
 * 7. The functions `queue_claim` and `queue_record`: a unit's claim and record statements as PL/pgSQL, so the
 *    server keeps their plans per connection instead of planning them on every call (see `Queue.functions`).
 * 8. Retries, dead letters and work that runs later: `attempts`, `last_error`, `run_at` (null: due at once) and
 *    `dead_at` on each item; the partial indexes the claim walks instead of `queue_pending_id_idx` (items never
 *    timed by id, timed items by time), the dead letters' index, and the functions replaced by the statements
 *    that read them (a `queue_claim` that takes now and walks the timed items only when one is due; the
 *    three-argument one a previous release calls reads the server's clock and cuts each batch before its first
 *    item that is not due), and `queue_record_done`, the record of a batch whose outcomes are all done.
 * 9. `queue_record_units`: the done outcomes of many units with their heartbeats or releases, then the claim of
 *    the freed workers' next units, in one statement (a worker's record waits for at most one statement in flight).
 *
 * @since 0.1.0
 * @category constants
 */
export const migrations: ReadonlyArray<Migrator.Migration> = [
  Tables.migration,
  ...Indexes.migrations,
  Functions.migration,
  Retries.migration,
  RecordUnits.migration
]

/**
 * The queue as a {@link Migrator.Component}.
 *
 * @since 0.1.0
 * @category constants
 */
export const component: Migrator.Component = { name: "queue", migrations }
