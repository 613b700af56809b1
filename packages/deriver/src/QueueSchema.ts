/**
 * The queue's tables and indexes in a tenant schema, as versioned migrations for `Migrator` of `@resilience/schema`.
 *
 * @since 0.1.0
 */
import type { Migrator } from "@resilience/schema"
import { SchemaName } from "@resilience/schema"
import * as Queue from "./Queue.ts"

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
 *
 * @since 0.1.0
 */
export const migrations: ReadonlyArray<Migrator.Migration> = [
  {
    version: 1,
    name: "queue and ownership tables",
    up: (schema) => [
      `CREATE TABLE ${SchemaName.qualify(schema, "queue")} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        work_unit_key text NOT NULL,
        task_type text NOT NULL,
        payload jsonb NOT NULL DEFAULT '{}'::jsonb,
        processed boolean NOT NULL DEFAULT false,
        error text,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE ${SchemaName.qualify(schema, "active_queue_sessions")} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        work_unit_key text NOT NULL UNIQUE,
        owner text NOT NULL DEFAULT '',
        last_updated timestamptz NOT NULL DEFAULT now()
      )`
    ]
  },
  {
    version: 2,
    name: "partial index of unprocessed items",
    up: (schema) => [
      `CREATE INDEX queue_unprocessed_idx ON ${SchemaName.qualify(schema, "queue")} (work_unit_key, id)
        WHERE NOT processed`
    ]
  },
  {
    version: 3,
    name: "ownership heartbeat index",
    up: (schema) => [
      `CREATE INDEX active_queue_sessions_last_updated_idx
        ON ${SchemaName.qualify(schema, "active_queue_sessions")} (last_updated)`
    ]
  },
  {
    version: 4,
    name: "partial index of processed items by age",
    up: (schema) => [
      `CREATE INDEX queue_processed_created_at_idx ON ${SchemaName.qualify(schema, "queue")} (created_at)
        WHERE processed`
    ]
  },
  {
    version: 5,
    name: "who completed each item",
    // Written by `Queue.record` with the mark: the owner and the claim (the fencing token) it acted for, and
    // the time of the mark; what a consistency checker needs to show that no item was completed by a worker
    // that no longer owned its unit. Nullable: items marked before this migration have none.
    up: (schema) => [
      `ALTER TABLE ${SchemaName.qualify(schema, "queue")}
        ADD COLUMN processed_by text, ADD COLUMN processed_claim bigint, ADD COLUMN processed_at timestamptz`
    ]
  },
  {
    version: 6,
    name: "partial index of unprocessed items by id",
    // The claim's walk in id order (see `Queue.claimSql`). An instance of an older version ignores it.
    up: (schema) => [
      `CREATE INDEX queue_pending_id_idx ON ${SchemaName.qualify(schema, "queue")} (id) WHERE NOT processed`
    ]
  },
  {
    version: 7,
    name: "claim and record functions",
    // The bodies are the statements of `Queue.claimWithItemsSql` and `Queue.recordSql` as they are now (PL/pgSQL
    // reads `$n` as the n-th argument); a later change to either statement needs a migration that replaces its
    // function. `use_column`: the result columns' names are also the tables' column names. `force_generic_plan`:
    // PL/pgSQL would otherwise plan the claim afresh on every call (its generic plan's estimate for `LIMIT $1`
    // looks costlier than the custom plans, so the server never switches); the generic plans read the same rows
    // (Queue.test.ts). An instance of an older version sends the statements themselves and ignores the functions.
    up: (schema) => {
      const { claim, record } = Queue.functions(schema)
      const body = (statement: string) =>
        `$body$\n#variable_conflict use_column\nBEGIN\n  RETURN QUERY ${statement};\nEND\n$body$`
      return [
        `CREATE FUNCTION ${claim}(integer, text, integer) RETURNS TABLE (work_unit_key text, id text, items text)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS ${body(Queue.claimWithItemsSql(schema))}`,
        `CREATE FUNCTION ${record}(jsonb, text, text, boolean, bigint) RETURNS TABLE (owned boolean, marked integer)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS ${body(Queue.recordSql(schema))}`
      ]
    }
  }
]

/**
 * The queue as a {@link Migrator.Component}.
 *
 * @since 0.1.0
 */
export const component: Migrator.Component = { name: "queue", migrations }
