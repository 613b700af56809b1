/**
 * The queue as a workspace sees it: pending, in progress, waiting (a retry or a later time), dead, processed and
 * errored items.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Model } from "@resilience/model"
import type { SchemaName } from "@resilience/schema"
import { Effect } from "effect"
import * as Statements from "./internal/statements/QueueStatus.ts"

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
  DbSession.use((db) => db.query<QueueStatus>(Statements.selectQueueStatus(schema), [workspace])).pipe(
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
