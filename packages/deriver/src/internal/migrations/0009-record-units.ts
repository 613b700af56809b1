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
 * how many items it marked. Unit by unit, each statement keyed by the unit: a statement that joined the units (a
 * JSON array) with the items kept the plan made on a connection's first call, and one made against an empty queue
 * walked every unprocessed item on every later call (30–70 ms a record at 3,200 jobs/s with 100,000 items, issue
 * #47; no planner setting made a join of an array the planner cannot size safe). Keyed by a unit, a statement reads
 * that unit's rows by their indexes whatever the plan saw (Queue.test.ts: plans kept from an empty queue). Then,
 * when `$3` > 0, `queue_claim($3, $2, $4, $5)` in a statement of its own (a new snapshot: it sees the releases), one row per claimed unit with its first
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
DECLARE
  u jsonb;
  n integer;
BEGIN
  FOR u IN SELECT value FROM jsonb_array_elements($1) LOOP
    PERFORM FROM ${sessions}
    WHERE work_unit_key = u ->> 'unit' AND owner = $2 AND id = (u ->> 'claim')::bigint FOR UPDATE;
    IF FOUND THEN
      UPDATE ${queue} q
      SET processed = true, error = o ->> 'error', attempts = q.attempts + 1,
          last_error = coalesce(o ->> 'error', q.last_error),
          processed_by = $2, processed_claim = (u ->> 'claim')::bigint, processed_at = clock_timestamp()
      FROM jsonb_array_elements(u -> 'outcomes') AS o
      WHERE q.id = (o ->> 'id')::bigint AND q.work_unit_key = u ->> 'unit' AND NOT q.processed
        AND q.dead_at IS NULL;
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN QUERY SELECT u ->> 'unit', true, n, NULL::text, NULL::text;
    ELSE
      RETURN QUERY SELECT u ->> 'unit', false, 0, NULL::text, NULL::text;
    END IF;
  END LOOP;
  FOR u IN SELECT value FROM jsonb_array_elements($1) LOOP
    IF (u ->> 'release')::boolean THEN
      DELETE FROM ${sessions}
      WHERE work_unit_key = u ->> 'unit' AND owner = $2 AND id = (u ->> 'claim')::bigint;
    ELSE
      UPDATE ${sessions} SET last_updated = now()
      WHERE work_unit_key = u ->> 'unit' AND owner = $2 AND id = (u ->> 'claim')::bigint;
    END IF;
  END LOOP;
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
