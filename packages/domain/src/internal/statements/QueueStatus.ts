/**
 * The statements of `QueueStatus`.
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/**
 * The queue status of workspace `$1`: the backlog through its partial index by workspace; processed and errored
 * from the trigger-kept counters, so the cost follows the backlog, not the history (migration 5). A dead letter or
 * an item not yet due (its retry, or the time it was enqueued for) is neither pending nor in progress.
 */
export const selectQueueStatus = perSchema(({ queue, queueCounts, queueSessions }) =>
  `SELECT
  count(*) FILTER (WHERE a.work_unit_key IS NULL AND q.dead_at IS NULL AND coalesce(q.run_at <= now(), true))::int
    AS "pending",
  count(*) FILTER (WHERE a.work_unit_key IS NOT NULL AND q.dead_at IS NULL AND coalesce(q.run_at <= now(), true))::int
    AS "inProgress",
  count(*) FILTER (WHERE q.dead_at IS NULL AND q.run_at > now())::int AS "waiting",
  count(*) FILTER (WHERE q.dead_at IS NOT NULL)::int AS "dead",
  coalesce((SELECT c.processed FROM ${queueCounts} c WHERE c.workspace = $1), 0)::int AS "processed",
  coalesce((SELECT c.errored FROM ${queueCounts} c WHERE c.workspace = $1), 0)::int AS "errored"
FROM ${queue} q
LEFT JOIN ${queueSessions} a ON a.work_unit_key = q.work_unit_key
WHERE NOT q.processed AND q.payload ->> 'workspace' = $1`
)
