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
 * 8. Retries, dead letters and work that runs later: `attempts`, `last_error`, `run_at` (null: due at once) and
 *    `dead_at` on each item; the partial indexes the claim walks instead of `queue_pending_id_idx` (items never
 *    timed by id, timed items by time), the dead letters' index, and the functions replaced by the statements
 *    that read them (a `queue_claim` that takes now and walks the timed items only when one is due; the
 *    three-argument one a previous release calls reads the server's clock and cuts each batch before its first
 *    item that is not due), and `queue_record_done`, the record of a batch whose outcomes are all done.
 *
 * @since 0.1.0
 * @category constants
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
    // The bodies are the statements of `Queue.claimWithItemsSql` and `Queue.recordSql` as they were then (frozen
    // below; migration 8 replaced them). PL/pgSQL reads `$n` as the n-th argument. `use_column`: the result
    // columns' names are also the tables' column names. `force_generic_plan`: PL/pgSQL would otherwise plan the
    // claim afresh on every call (its generic plan's estimate for `LIMIT $1` looks costlier than the custom
    // plans, so the server never switches); the generic plans read the same rows (Queue.test.ts).
    up: (schema) => {
      const { claim, record } = Queue.functions(schema)
      return [
        `CREATE FUNCTION ${claim}(integer, text, integer) RETURNS TABLE (work_unit_key text, id text, items text)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS ${body(migration7.claim(schema))}`,
        `CREATE FUNCTION ${record}(jsonb, text, text, boolean, bigint) RETURNS TABLE (owned boolean, marked integer)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS ${body(migration7.record(schema))}`
      ]
    }
  },
  {
    version: 8,
    name: "retries, dead letters and items that run later",
    // Expand only: columns with constant defaults (no table rewrite), new indexes, functions replaced with the
    // same signatures and results. A previous release runs against it during a rollout: it calls the
    // three-argument `queue_claim` (now the new statement on the server's clock, so it too leaves waiting items
    // and dead letters alone in the first batch of a unit) and `queue_record` with `{ id, error }` outcomes
    // (processed or failed as before). Its own `nextItems`, for a unit's later batches, still reads every
    // unprocessed item: until the rollout ends, an old instance may run a waiting item early or a dead letter
    // once more. `queue_pending_id_idx` stays for it; a later contract migration drops it.
    up: (schema) => {
      const queue = SchemaName.qualify(schema, "queue")
      const { claim, record, recordDone } = Queue.functions(schema)
      const claimed = "RETURNS TABLE (work_unit_key text, id text, items text)"
      // `jit = off` on every function: the generic plan of a claim cannot know `LIMIT $1` and costs it as a tenth of
      // the backlog, so its estimate grows with the queue while the claim's work does not; past `jit_above_cost`
      // (100,000) a server built with LLVM (Debian's, PGDG's, most managed ones; `jit = on` by default) compiled
      // the claim on every call (250–950 ms, against 1 ms). Queue statements are short; none gains from JIT.
      const generic = "LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off"
      // Scans of the whole table and bitmap scans off for the claim: its plans are kept for the connection's life,
      // and one made against a never-analyzed table, kept as it grows, read a unit's rows by a bitmap and sorted
      // them for the probe of its first item (9.6 ms a claim at 100,000 rows on PostgreSQL 15, against 2.1 ms), or
      // the whole table. Every read of the claim has an index that gives its rows in order; with these two off no
      // plan node is disabled (PostgreSQL 14–17 add 10¹⁰ to the cost of one, 18 counts them), so the cost stays
      // that of the plan (docs/results/postgres-builds.md).
      const walks = "SET enable_seqscan = off SET enable_bitmapscan = off"
      // The three-argument function a previous release calls: the claim on the server's clock, each batch cut
      // before its first item that is not due (that release reads every item it is given).
      const cut = `SELECT c.work_unit_key, c.id,
          (SELECT coalesce(json_agg(b.item ORDER BY b.n), '[]')::text FROM (
             SELECT e.item, e.n, bool_or(coalesce((e.item ->> 'later')::boolean, false)) OVER (ORDER BY e.n) AS held
             FROM json_array_elements(c.items::json) WITH ORDINALITY AS e(item, n)
           ) b WHERE NOT b.held)
        FROM ${claim}($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::float8) c`
      return [
        `ALTER TABLE ${queue}
          ADD COLUMN attempts integer NOT NULL DEFAULT 0, ADD COLUMN last_error text,
          ADD COLUMN run_at timestamptz, ADD COLUMN dead_at timestamptz`,
        `CREATE INDEX queue_ready_id_idx ON ${queue} (id) WHERE NOT processed AND run_at IS NULL`,
        `CREATE INDEX queue_run_at_idx ON ${queue} (run_at, id) WHERE NOT processed AND run_at IS NOT NULL`,
        `CREATE INDEX queue_dead_idx ON ${queue} (id) WHERE NOT processed AND dead_at IS NOT NULL`,
        `CREATE FUNCTION ${claim}(integer, text, integer, float8) ${claimed}
          ${generic} ${walks} AS ${Queue.claimBody(schema)}`,
        `CREATE OR REPLACE FUNCTION ${claim}(integer, text, integer) ${claimed} ${generic} AS ${body(cut)}`,
        `CREATE OR REPLACE FUNCTION ${record}(jsonb, text, text, boolean, bigint)
          RETURNS TABLE (owned boolean, marked integer) ${generic} AS ${Queue.recordBody(schema)}`,
        // The record of a batch of done outcomes without `queue_record`'s test of them: the caller knows.
        `CREATE FUNCTION ${recordDone}(jsonb, text, text, boolean, bigint)
          RETURNS TABLE (owned boolean, marked integer) ${generic} AS ${body(Queue.recordDoneSql(schema))}`
      ]
    }
  }
]

/** A statement as the body of a PL/pgSQL function that returns its rows. */
const body = (statement: string) =>
  `$body$\n#variable_conflict use_column\nBEGIN\n  RETURN QUERY ${statement};\nEND\n$body$`

/**
 * The statements migration 7 installed, as they were (a migration never changes once released; Queue's
 * statements have moved on, see migration 8).
 */
const migration7 = {
  claim: (schema: SchemaName.SchemaName) => {
    const queue = SchemaName.qualify(schema, "queue")
    const sessions = SchemaName.qualify(schema, "active_queue_sessions")
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
)
SELECT c.work_unit_key, claimed.id::text AS id,
  (SELECT coalesce(json_agg(json_build_object('id', i.id::text, 'task_type', i.task_type, 'payload', i.payload)
                            ORDER BY i.id), '[]')::text
   FROM (SELECT q.id, q.task_type, q.payload FROM ${queue} q
         WHERE q.work_unit_key = c.work_unit_key AND NOT q.processed ORDER BY q.id LIMIT $3) i) AS items
FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id`
  },
  record: (schema: SchemaName.SchemaName) => {
    const queue = SchemaName.qualify(schema, "queue")
    const sessions = SchemaName.qualify(schema, "active_queue_sessions")
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
}

/**
 * The queue as a {@link Migrator.Component}.
 *
 * @since 0.1.0
 * @category constants
 */
export const component: Migrator.Component = { name: "queue", migrations }
