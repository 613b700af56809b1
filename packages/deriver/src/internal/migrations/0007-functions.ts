/**
 * Queue migration 7 (released in 0.2.0; frozen): the claim and the record as PL/pgSQL functions, so the server keeps
 * their plans per connection instead of planning them on every call. Migration 8 replaced both; a database migrated
 * by 0.2.0 ran these texts.
 *
 * PL/pgSQL reads `$n` as the n-th argument. `use_column`: the result columns' names are also the tables' column
 * names. `force_generic_plan`: PL/pgSQL would otherwise plan the claim afresh on every call (its generic plan's
 * estimate for `LIMIT $1` looks costlier than the custom plans, so the server never switches).
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  7,
  "claim and record functions",
  ({ claim, queue, record, sessions }) => [
    `CREATE FUNCTION ${claim}(integer, text, integer) RETURNS TABLE (work_unit_key text, id text, items text)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $body$
#variable_conflict use_column
BEGIN
  RETURN QUERY WITH candidates AS MATERIALIZED (
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
FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id;
END
$body$`,
    `CREATE FUNCTION ${record}(jsonb, text, text, boolean, bigint) RETURNS TABLE (owned boolean, marked integer)
          LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $body$
#variable_conflict use_column
BEGIN
  RETURN QUERY WITH outcome AS (
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
               (SELECT count(*) FROM marked)::int AS marked;
END
$body$`
  ]
)
