/**
 * Queue migration 9 (unreleased: it may change until 0.3.0 ships, then it is frozen): `queue_record_units`, the
 * record of many units in one statement. Expand only: a new function; nothing a previous release calls changes.
 *
 * `queue_record_units(units, owner, claim limit, batch size, now)`: `$1` a JSON array of
 * `{ unit, claim, release, outcomes: [{ id, error }] }`, every outcome done (processed, with or without an error;
 * retries and dead letters go through `queue_record`). For each unit, only while its claim holds (owner `$2` and
 * the claim's id): its outcomes mark their items processed with who completed them, as `queue_record_done` does
 * for one unit; then with `release` its ownership row is deleted, else its heartbeat bumped. In
 * `queue_record_done`'s order (migration 8): the held ownership rows locked alone, the marks, then the deletes and
 * heartbeats, so a claim never waits for a record that waits for it. One row per unit: whether its claim held and
 * how many items it marked. Then, when `$3` > 0, `queue_claim($3, $2, $4,
 * $5)` in a statement of its own (a new snapshot: it sees the releases), one row per claimed unit with its first
 * batch: the units the freed workers take next, in the same round trip.
 *
 * `queue_poll(limit, owner, batch size, now)`: the poll's claim, `queue_claim`'s rows (`next_at` null); when it
 * claims nothing, one row with only `next_at`, the time of the earliest item waiting for a time
 * after now (a retry's, or the time it was enqueued with; dead letters, at infinity, are not), when there is one:
 * one probe of `queue_run_at_idx`, in the same round trip, so the deriver can wake at that time instead of its
 * schedule's next poll.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  9,
  "record of many units in one statement; the poll's next due time",
  ({ claim, poll, queue, recordUnits, sessions }) => [
    `CREATE FUNCTION ${recordUnits}(jsonb, text, integer, integer, float8)
  RETURNS TABLE (work_unit_key text, owned boolean, marked integer, id text, items text)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
AS $body$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH unit AS (
    SELECT u ->> 'unit' AS key, (u ->> 'claim')::bigint AS claim, u -> 'outcomes' AS outcomes
    FROM jsonb_array_elements($1) AS u
  ), held AS (
    SELECT s.work_unit_key AS key
    FROM ${sessions} s JOIN unit ON s.work_unit_key = unit.key AND s.owner = $2 AND s.id = unit.claim
    FOR UPDATE OF s
  ), outcome AS (
    SELECT unit.key, unit.claim, (o ->> 'id')::bigint AS id, o ->> 'error' AS error
    FROM unit, jsonb_array_elements(unit.outcomes) AS o
  ), marked AS (
    UPDATE ${queue} q
    SET processed = true, error = outcome.error, attempts = q.attempts + 1,
        last_error = coalesce(outcome.error, q.last_error),
        processed_by = $2, processed_claim = outcome.claim, processed_at = clock_timestamp()
    FROM outcome JOIN held ON held.key = outcome.key
    WHERE q.id = outcome.id AND q.work_unit_key = outcome.key AND NOT q.processed AND q.dead_at IS NULL
    RETURNING q.work_unit_key AS key
  )
  SELECT unit.key, held.key IS NOT NULL,
         (SELECT count(*) FROM marked WHERE marked.key = unit.key)::int, NULL::text, NULL::text
  FROM unit LEFT JOIN held ON held.key = unit.key;
  UPDATE ${sessions} s SET last_updated = now()
  FROM jsonb_array_elements($1) AS u
  WHERE s.work_unit_key = u ->> 'unit' AND s.owner = $2 AND s.id = (u ->> 'claim')::bigint
    AND NOT (u ->> 'release')::boolean;
  DELETE FROM ${sessions} s
  USING jsonb_array_elements($1) AS u
  WHERE s.work_unit_key = u ->> 'unit' AND s.owner = $2 AND s.id = (u ->> 'claim')::bigint
    AND (u ->> 'release')::boolean;
  IF $3 > 0 THEN
    RETURN QUERY
    SELECT c.work_unit_key, NULL::boolean, NULL::integer, c.id, c.items FROM ${claim}($3, $2, $4, $5) c;
  END IF;
END
$body$`,
    `CREATE FUNCTION ${poll}(integer, text, integer, float8)
  RETURNS TABLE (work_unit_key text, id text, items text, next_at timestamptz)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
  SET enable_seqscan = off SET enable_bitmapscan = off
AS $body$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT c.work_unit_key, c.id, c.items, NULL::timestamptz FROM ${claim}($1, $2, $3, $4) c;
  IF NOT FOUND THEN
    RETURN QUERY
    SELECT NULL::text, NULL::text, NULL::text, t.run_at
    FROM ${queue} t
    WHERE NOT t.processed AND t.run_at > to_timestamp($4 / 1000) AND t.run_at < 'infinity'
    ORDER BY t.run_at LIMIT 1;
  END IF;
END
$body$`
  ]
)
