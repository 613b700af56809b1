/**
 * Queue migration 8 (unreleased: it may change until 0.3.0 ships, then it is frozen like the others): retries, dead
 * letters and items that run later, and the claim and record functions that read them. Each function is one text
 * here, as `\sf` shows it on a migrated server.
 *
 * Expand only: columns with constant defaults (no table rewrite), new indexes, functions replaced with the same
 * signatures and results. A previous release runs against it during a rollout: it calls the three-argument
 * `queue_claim` (now the new claim on the server's clock, so it too leaves waiting items and dead letters alone in
 * the first batch of a unit) and `queue_record` with `{ id, error }` outcomes (processed or failed as before). Its
 * own read of a unit's later batches still reads every unprocessed item: until the rollout ends, an old instance
 * may run a waiting item early or a dead letter once more. `queue_pending_id_idx` stays for it; a later contract
 * migration drops it.
 *
 * Settings of every function:
 * - `force_generic_plan`: one plan per connection (see migration 7).
 * - `jit = off`: the generic plan of a claim cannot know `LIMIT $1` and costs it as a tenth of the backlog, so its
 *   estimate grows with the queue while the claim's work does not; past `jit_above_cost` (100,000) a server built
 *   with LLVM (Debian's, PGDG's, most managed ones; `jit = on` by default) compiled the claim on every call
 *   (250–950 ms, against 1 ms). Queue statements are short; none gains from JIT.
 * - The claim only, `enable_seqscan = off` and `enable_bitmapscan = off`: its plans are kept for the connection's
 *   life, and one made against a never-analyzed table, kept as it grows, read a unit's rows by a bitmap and sorted
 *   them, or read the whole table. Every read of the claim has an index that gives its rows in order; with these
 *   two off no plan node is disabled (PostgreSQL 14–17 add 10¹⁰ to the cost of one), so the cost stays that of
 *   the plan (docs/results/postgres-builds.md).
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

/**
 * A record's first step (`queue_record`, `queue_record_done`): the unit's ownership row (owner $3, claim $5, unit $2)
 * locked alone; when the claim no longer holds, the record ends there with `(false, 0)`.
 */
const lockOwnership = (sessions: string) =>
  `  PERFORM FROM ${sessions} WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT false, 0;
    RETURN;
  END IF;`

/** A record's last step, after the marks (`n` of them): with $4 the ownership row deleted, else its heartbeat bumped. */
const releaseOrBeat = (sessions: string) =>
  `  IF $4 THEN
    DELETE FROM ${sessions} WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint;
  ELSE
    UPDATE ${sessions} SET last_updated = now() WHERE work_unit_key = $2 AND owner = $3 AND id = $5::bigint;
  END IF;
  RETURN QUERY SELECT true, n;`

export const migration: Migrator.Migration = Names.migration(
  8,
  "retries, dead letters and items that run later",
  ({ claim, queue, record, recordDone, sessions }) => [
    `ALTER TABLE ${queue}
  ADD COLUMN attempts integer NOT NULL DEFAULT 0, ADD COLUMN last_error text,
  ADD COLUMN run_at timestamptz, ADD COLUMN dead_at timestamptz`,
    `CREATE INDEX queue_ready_id_idx ON ${queue} (id) WHERE NOT processed AND run_at IS NULL`,
    `CREATE INDEX queue_run_at_idx ON ${queue} (run_at, id) WHERE NOT processed AND run_at IS NOT NULL`,
    `CREATE INDEX queue_dead_idx ON ${queue} (id) WHERE NOT processed AND dead_at IS NOT NULL`,
    // queue_claim(limit, owner, batch size, now in epoch milliseconds, after): up to $1 units whose first live item
    // (unprocessed, not a dead letter) is due and that nobody owns, made ours by inserting their ownership rows
    // (ON CONFLICT DO NOTHING: a unit another instance claimed in the meantime is skipped), each with its first
    // $3 live items as JSON, every item marked `later` when its time is after now (the reader cuts the batch
    // there: a unit is handled in order). Candidates come from two walks, each stopping after $1 units: items
    // never timed in id order (queue_ready_id_idx) and timed items that are due in time order
    // (queue_run_at_idx); the oldest $1 by id win. An item waiting for its time, or a dead letter (its time is
    // infinity), is in neither walk. An item is kept when it is its unit's first live item and the unit has no
    // ownership row: two scalar subqueries, each an index probe keyed by the unit (an anti join's kept plan
    // could become a scan of every unprocessed row per candidate). FOR NO KEY UPDATE ... SKIP LOCKED: claims at
    // the same moment take different units. When no timed item is due (the IF's test, one probe of
    // queue_run_at_idx), the second walk is skipped and every timed item is later: two statements, two plans.
    // The walk of untimed items starts after id $5 (0: from the start): a record's claim along starts after the
    // newest unit the last claim took, past the units held and the index entries of items processed since the last
    // vacuum (the deriver's ClaimCursor says when it walks from the start again); polls walk from the start.
    `CREATE FUNCTION ${claim}(integer, text, integer, float8, bigint)
  RETURNS TABLE (work_unit_key text, id text, items text)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
  SET enable_seqscan = off SET enable_bitmapscan = off
AS $body$
#variable_conflict use_column
BEGIN
  IF (SELECT t.run_at FROM ${queue} t WHERE NOT t.processed AND t.run_at < 'infinity' ORDER BY t.run_at LIMIT 1)
     <= to_timestamp($4::float8 / 1000) THEN
    RETURN QUERY
    WITH ready AS MATERIALIZED (
      SELECT q.work_unit_key, q.id AS first_id
      FROM ${queue} q
      WHERE NOT q.processed AND q.run_at IS NULL AND q.id > $5
        AND q.id = (
          SELECT e.id FROM ${queue} e
          WHERE e.work_unit_key = q.work_unit_key AND NOT e.processed AND e.dead_at IS NULL
          ORDER BY e.work_unit_key, e.id LIMIT 1
        )
        AND (SELECT a.id FROM ${sessions} a WHERE a.work_unit_key = q.work_unit_key) IS NULL
      ORDER BY q.id
      LIMIT $1
      FOR NO KEY UPDATE OF q SKIP LOCKED
    ), due AS MATERIALIZED (
      SELECT q.work_unit_key, q.id AS first_id
      FROM ${queue} q
      WHERE NOT q.processed AND q.run_at <= to_timestamp($4::float8 / 1000)
        AND q.id = (
          SELECT e.id FROM ${queue} e
          WHERE e.work_unit_key = q.work_unit_key AND NOT e.processed AND e.dead_at IS NULL
          ORDER BY e.work_unit_key, e.id LIMIT 1
        )
        AND (SELECT a.id FROM ${sessions} a WHERE a.work_unit_key = q.work_unit_key) IS NULL
      ORDER BY q.run_at, q.id
      LIMIT $1
      FOR NO KEY UPDATE OF q SKIP LOCKED
    ), candidates AS MATERIALIZED (
      SELECT work_unit_key, first_id FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) u
      ORDER BY first_id LIMIT $1
    ), claimed AS (
      INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
      SELECT c.work_unit_key, $2, now() FROM candidates c ORDER BY c.first_id
      ON CONFLICT (work_unit_key) DO NOTHING
      RETURNING work_unit_key, id
    )
    SELECT c.work_unit_key, claimed.id::text AS id,
      (SELECT coalesce(json_agg(json_build_object(
                'id', i.id::text, 'task_type', i.task_type, 'payload', i.payload, 'attempts', i.attempts,
                'later', CASE WHEN i.run_at IS NOT NULL THEN i.run_at > to_timestamp($4::float8 / 1000) END
              ) ORDER BY i.id), '[]')::text
       FROM (SELECT q.id, q.task_type, q.payload, q.attempts, q.run_at FROM ${queue} q
             WHERE q.work_unit_key = c.work_unit_key AND NOT q.processed AND q.dead_at IS NULL
             ORDER BY q.id LIMIT $3) i) AS items
    FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id;
  ELSE
    RETURN QUERY
    WITH ready AS MATERIALIZED (
      SELECT q.work_unit_key, q.id AS first_id
      FROM ${queue} q
      WHERE NOT q.processed AND q.run_at IS NULL AND q.id > $5
        AND q.id = (
          SELECT e.id FROM ${queue} e
          WHERE e.work_unit_key = q.work_unit_key AND NOT e.processed AND e.dead_at IS NULL
          ORDER BY e.work_unit_key, e.id LIMIT 1
        )
        AND (SELECT a.id FROM ${sessions} a WHERE a.work_unit_key = q.work_unit_key) IS NULL
      ORDER BY q.id
      LIMIT $1
      FOR NO KEY UPDATE OF q SKIP LOCKED
    ), candidates AS MATERIALIZED (
      SELECT work_unit_key, first_id FROM ready
    ), claimed AS (
      INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
      SELECT c.work_unit_key, $2, now() FROM candidates c ORDER BY c.first_id
      ON CONFLICT (work_unit_key) DO NOTHING
      RETURNING work_unit_key, id
    )
    SELECT c.work_unit_key, claimed.id::text AS id,
      (SELECT coalesce(json_agg(json_build_object(
                'id', i.id::text, 'task_type', i.task_type, 'payload', i.payload, 'attempts', i.attempts,
                'later', i.run_at IS NOT NULL
              ) ORDER BY i.id), '[]')::text
       FROM (SELECT q.id, q.task_type, q.payload, q.attempts, q.run_at FROM ${queue} q
             WHERE q.work_unit_key = c.work_unit_key AND NOT q.processed AND q.dead_at IS NULL
             ORDER BY q.id LIMIT $3) i) AS items
    FROM claimed JOIN candidates c USING (work_unit_key) ORDER BY c.first_id;
  END IF;
END
$body$`,
    // The three-argument claim a previous release calls: the claim above on the server's clock, each batch cut
    // before its first item that is not due (that release reads every item it is given).
    `CREATE OR REPLACE FUNCTION ${claim}(integer, text, integer)
  RETURNS TABLE (work_unit_key text, id text, items text)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
AS $body$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT c.work_unit_key, c.id,
    (SELECT coalesce(json_agg(b.item ORDER BY b.n), '[]')::text FROM (
       SELECT e.item, e.n, bool_or(coalesce((e.item ->> 'later')::boolean, false)) OVER (ORDER BY e.n) AS held
       FROM json_array_elements(c.items::json) WITH ORDINALITY AS e(item, n)
     ) b WHERE NOT b.held)
  FROM ${claim}($1, $2, $3, (extract(epoch FROM clock_timestamp()) * 1000)::float8, 0) c;
END
$body$`,
    // queue_record(outcomes, unit, owner, release, claim id): $1 a JSON array of { id, error, retry_at, dead } (an
    // outcome of only { id, error }, as a previous release sends, is processed or failed as before). Only while
    // the claim holds (owner $3 and id $5 of unit $2): every outcome counts one attempt and keeps its error as the
    // item's last_error; a done outcome marks the item processed with who completed it; a retry sets its run_at,
    // a dead letter sets dead_at and the time infinity (both stay unprocessed); then with $4 it deletes the
    // ownership row, else bumps its heartbeat. A retry also moves the unit's later items to its time: they could
    // not run before it anyway, and so they leave the claim's walk of untimed items for the walk of timed ones. A
    // batch of done outcomes only (the common case) takes the second branch, queue_record_done.
    //
    // The order of a record's statements (both functions): the ownership row locked alone (FOR UPDATE, which a
    // claim's insert of that unit's row does not wait for), then the marks, then the delete or heartbeat. A claim
    // whose snapshot predates the unit's claim can lock the unit's first item (the claimer committed, so the lock
    // is free) and then insert the unit's ownership row; had the record already deleted or bumped that row in its
    // open transaction, the insert would wait for the record while the record's mark waits for the item's lock: a
    // deadlock (seen at 1,600 jobs/s, issue #47; Queue.test.ts reproduces it). Locked first and changed last, the
    // row never makes the claim wait while the record waits for the claim.
    `CREATE OR REPLACE FUNCTION ${record}(jsonb, text, text, boolean, bigint)
  RETURNS TABLE (owned boolean, marked integer)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
AS $body$
#variable_conflict use_column
DECLARE
  n integer;
BEGIN
  IF jsonb_path_exists($1, '$[*] ? (@.retry_at != null || @.dead == true)') THEN
${lockOwnership(sessions)}
    WITH outcome AS (
      SELECT (o ->> 'id')::bigint AS id, o ->> 'error' AS error,
             to_timestamp((o ->> 'retry_at')::float8 / 1000) AS retry_at,
             coalesce((o ->> 'dead')::boolean, false) AS dead,
             o ->> 'retry_at' IS NULL AND NOT coalesce((o ->> 'dead')::boolean, false) AS done
      FROM jsonb_array_elements($1::jsonb) AS o
    ), marked AS (
      UPDATE ${queue} q
      SET processed = outcome.done,
          error = CASE WHEN outcome.done THEN outcome.error END,
          attempts = q.attempts + 1,
          last_error = coalesce(outcome.error, q.last_error),
          run_at = CASE WHEN outcome.dead THEN 'infinity'::timestamptz ELSE coalesce(outcome.retry_at, q.run_at) END,
          dead_at = CASE WHEN outcome.dead THEN clock_timestamp() END,
          processed_by = CASE WHEN outcome.done THEN $3 END,
          processed_claim = CASE WHEN outcome.done THEN $5::bigint END,
          processed_at = CASE WHEN outcome.done THEN clock_timestamp() END
      FROM outcome
      WHERE q.id = outcome.id AND q.work_unit_key = $2 AND NOT q.processed AND q.dead_at IS NULL
      RETURNING q.id
    ), retried AS (
      SELECT min(id) AS id, max(retry_at) AS retry_at FROM outcome WHERE retry_at IS NOT NULL
    ), held AS (
      UPDATE ${queue} q SET run_at = retried.retry_at
      FROM retried
      WHERE retried.id IS NOT NULL AND q.work_unit_key = $2 AND q.id > retried.id AND NOT q.processed
        AND q.dead_at IS NULL AND (q.run_at IS NULL OR q.run_at < retried.retry_at)
      RETURNING 1
    )
    SELECT count(*) INTO n FROM marked;
${releaseOrBeat(sessions)}
  ELSE
    RETURN QUERY
    SELECT d.owned, d.marked FROM ${recordDone}($1, $2, $3, $4, $5) d;
  END IF;
END
$body$`,
    // queue_record_done: queue_record for a batch whose outcomes are all done (processed, with or without an
    // error), without the retry's steps, in the same order; the deriver calls it directly for such a batch.
    `CREATE FUNCTION ${recordDone}(jsonb, text, text, boolean, bigint)
  RETURNS TABLE (owned boolean, marked integer)
  LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET jit = off
AS $body$
#variable_conflict use_column
DECLARE
  n integer;
BEGIN
${lockOwnership(sessions)}
  UPDATE ${queue} q
  SET processed = true, error = o ->> 'error', attempts = q.attempts + 1,
      last_error = coalesce(o ->> 'error', q.last_error),
      processed_by = $3, processed_claim = $5::bigint, processed_at = clock_timestamp()
  FROM jsonb_array_elements($1::jsonb) AS o
  WHERE q.id = (o ->> 'id')::bigint AND q.work_unit_key = $2 AND NOT q.processed AND q.dead_at IS NULL;
  GET DIAGNOSTICS n = ROW_COUNT;
${releaseOrBeat(sessions)}
END
$body$`
  ]
)
