/**
 * The queue as a workspace sees it: pending, in progress, waiting (a retry or a later time), dead, processed and
 * errored items.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Model } from "@resilience/model"
import { SchemaName } from "@resilience/schema"
import { Effect } from "effect"

/**
 * Item counts of one workspace (see `Model.QueueStatus`).
 *
 * @since 0.1.0
 */
export type QueueStatus = Model.QueueStatus

/**
 * The queue status of a workspace (items whose payload names it).
 *
 * @since 0.1.0
 */
export const forWorkspace = (
  schema: SchemaName.SchemaName,
  workspace: string
): Effect.Effect<QueueStatus, DbError, DbSession> =>
  DbSession.use((db) =>
    db.query<QueueStatus>(
      // The backlog through its partial index by workspace; processed and errored from the trigger-kept
      // counters: the cost follows the backlog, not the history (see DomainSchema, migration 5).
      // A dead letter or an item not yet due (its retry, or the time it was enqueued for) is neither pending
      // nor in progress.
      `SELECT
         count(*) FILTER (WHERE a.work_unit_key IS NULL AND q.dead_at IS NULL AND coalesce(q.run_at <= now(), true))::int
           AS "pending",
         count(*) FILTER (WHERE a.work_unit_key IS NOT NULL AND q.dead_at IS NULL AND coalesce(q.run_at <= now(), true))::int
           AS "inProgress",
         count(*) FILTER (WHERE q.dead_at IS NULL AND q.run_at > now())::int AS "waiting",
         count(*) FILTER (WHERE q.dead_at IS NOT NULL)::int AS "dead",
         coalesce((SELECT c.processed FROM ${
        SchemaName.qualify(schema, "queue_counts")
      } c WHERE c.workspace = $1), 0)::int
           AS "processed",
         coalesce((SELECT c.errored FROM ${
        SchemaName.qualify(schema, "queue_counts")
      } c WHERE c.workspace = $1), 0)::int
           AS "errored"
       FROM ${SchemaName.qualify(schema, "queue")} q
       LEFT JOIN ${SchemaName.qualify(schema, "active_queue_sessions")} a ON a.work_unit_key = q.work_unit_key
       WHERE NOT q.processed AND q.payload ->> 'workspace' = $1`,
      [workspace]
    )
  ).pipe(
    Effect.map(([row]) => ({
      pending: row?.pending ?? 0,
      inProgress: row?.inProgress ?? 0,
      waiting: row?.waiting ?? 0,
      dead: row?.dead ?? 0,
      processed: row?.processed ?? 0,
      errored: row?.errored ?? 0
    })),
    Effect.withSpan("QueueStatus.forWorkspace", { attributes: { schema, workspace } })
  )
