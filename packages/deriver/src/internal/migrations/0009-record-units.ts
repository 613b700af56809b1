/**
 * Queue migration 9 (unreleased: it may change until 0.3.0 ships, then it is frozen): `queue_record_units`, the
 * record of many units in one statement. Expand only: a new function; nothing a previous release calls changes.
 *
 * `queue_record_units(units, owner, claim limit, batch size, now, after)`: `$1` a JSON array of
 * `{ unit, claim, release, outcomes: [{ id, error }] }`, every outcome done (processed, with or without an error;
 * retries and dead letters go through `queue_record`). For each unit, only while its claim holds (owner `$2` and
 * the claim's id): its outcomes mark their items processed with who completed them, as `queue_record_done` does
 * for one unit; then with `release` its ownership row is deleted, else its heartbeat bumped. In
 * `queue_record_done`'s order (migration 8): the held ownership rows locked alone, the marks, then the deletes and
 * heartbeats, so a claim never waits for a record that waits for it. One row per unit, in the order of `$1`: whether
 * its claim held and how many items it marked. Then, when `$3` > 0, `queue_claim($3, $2, $4, $5, $6)` in a statement of
 * its own (a new snapshot: it sees the releases), one row per claimed unit with its first batch: the units the freed
 * workers take next, in the same round trip; `$6` is where that claim's walk of untimed items starts (after this id, 0:
 * from the start).
 *
 * Each step is one statement for all the units (four statements a unit before: the record of 30 units of one item
 * took 2.2–5 ms on Debian's PostgreSQL 15 under load, against 0.7–1.3 ms), and none joins a set with the items or
 * the ownership rows. `$1` is read once into arrays sorted by key: the claims with their units and releases, the items'
 * ids with their errors, units and claims (`array_agg(… ORDER BY key)`, which `width_bucket` needs to be right; the
 * subquery is sorted too, so PostgreSQL 16 and later aggregate its rows presorted, while 15 sorts once per array:
 * ~0.3 ms at 600 items, a few µs at 30). Each
 * statement reads its rows by `= ANY` of an array, one index probe per key, and finds a row's values in the arrays
 * by `width_bucket` (a binary search of the sorted array). A statement that joined the units (a JSON array) with the
 * items kept the plan made on a connection's first call, and one made against an empty queue walked every
 * unprocessed item on every later call (30–70 ms a record at 3,200 jobs/s with 100,000 items, issue #47; no planner
 * setting made a join of an array the planner cannot size safe). A scan by `= ANY` has no join order to get wrong:
 * only a sequential scan could replace its probes, and against a never-analyzed table of a few rows the planner
 * costs one within 20 % of the bitmap scan (the cheaper for a mark with one filter less: 40 ms a record), so
 * `enable_seqscan = off` (Queue.test.ts: plans kept from an empty queue and from a queue of one item).
 *
 * `queue_poll(limit, owner, batch size, now)`: the poll's claim, `queue_claim`'s rows (`next_at` null; its walk from
 * the start); when it
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
    `CREATE FUNCTION ${recordUnits}(jsonb, text, integer, integer, float8, bigint)
  RETURNS TABLE (work_unit_key text, owned boolean, marked integer, id text, items text)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
  SET enable_seqscan = off
AS $body$
#variable_conflict use_column
DECLARE
  claims bigint[];
  units text[];
  releases boolean[];
  ids bigint[];
  errors text[];
  item_units text[];
  item_claims bigint[];
  held bigint[];
  released bigint[];
  beating bigint[];
BEGIN
  SELECT u.claims, u.units, u.releases, o.ids, o.errors, o.units, o.claims
  INTO claims, units, releases, ids, errors, item_units, item_claims
  FROM (
    SELECT array_agg(u.claim ORDER BY u.claim) AS claims, array_agg(u.unit ORDER BY u.claim) AS units,
           array_agg(u.release ORDER BY u.claim) AS releases
    FROM (
      SELECT u.claim, u.unit, u.release FROM jsonb_to_recordset($1) AS u(unit text, claim bigint, release boolean)
      WHERE u.claim IS NOT NULL ORDER BY u.claim
    ) u
  ) u, (
    SELECT array_agg(o.id ORDER BY o.id) AS ids, array_agg(o.error ORDER BY o.id) AS errors,
           array_agg(o.unit ORDER BY o.id) AS units, array_agg(o.claim ORDER BY o.id) AS claims
    FROM (
      SELECT o.id, o.error, u.unit, u.claim
      FROM jsonb_to_recordset($1) AS u(unit text, claim bigint, outcomes jsonb)
      CROSS JOIN LATERAL jsonb_to_recordset(u.outcomes) AS o(id bigint, error text)
      WHERE o.id IS NOT NULL ORDER BY o.id
    ) o
  ) o;
  SELECT array_agg(l.id), array_agg(l.id) FILTER (WHERE l.release), array_agg(l.id) FILTER (WHERE l.release IS NOT TRUE)
  INTO held, released, beating
  FROM (
    SELECT s.id, releases[width_bucket(s.id, claims)] AS release FROM ${sessions} s
    WHERE s.id = ANY(claims) AND s.owner = $2 AND s.work_unit_key = units[width_bucket(s.id, claims)]
    FOR UPDATE
  ) l;
  RETURN QUERY
  WITH marked AS (
    UPDATE ${queue} q
    SET processed = true, error = errors[width_bucket(q.id, ids)], attempts = q.attempts + 1,
        last_error = coalesce(errors[width_bucket(q.id, ids)], q.last_error),
        processed_by = $2, processed_claim = item_claims[width_bucket(q.id, ids)], processed_at = clock_timestamp()
    WHERE q.id = ANY(ids) AND item_claims[width_bucket(q.id, ids)] = ANY(held)
      AND q.work_unit_key = item_units[width_bucket(q.id, ids)] AND NOT q.processed AND q.dead_at IS NULL
    RETURNING q.work_unit_key, q.processed_claim
  )
  SELECT u.unit, coalesce(u.claim = ANY(held), false), coalesce(m.n, 0), NULL::text, NULL::text
  FROM ROWS FROM (jsonb_to_recordset($1) AS (unit text, claim bigint)) WITH ORDINALITY AS u(unit, claim, i)
  LEFT JOIN (
    SELECT m.work_unit_key, m.processed_claim, count(*)::integer AS n FROM marked m GROUP BY 1, 2
  ) m ON m.work_unit_key = u.unit AND m.processed_claim = u.claim
  ORDER BY u.i;
  IF released IS NOT NULL THEN
    DELETE FROM ${sessions} s WHERE s.id = ANY(released) AND s.owner = $2;
  END IF;
  IF beating IS NOT NULL THEN
    UPDATE ${sessions} s SET last_updated = now() WHERE s.id = ANY(beating) AND s.owner = $2;
  END IF;
  IF $3 > 0 THEN
    RETURN QUERY
    SELECT c.work_unit_key, NULL::boolean, NULL::integer, c.id, c.items FROM ${claim}($3, $2, $4, $5, $6) c;
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
  SELECT c.work_unit_key, c.id, c.items, NULL::timestamptz FROM ${claim}($1, $2, $3, $4, 0) c;
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
