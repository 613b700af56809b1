/**
 * Messages: stored per workspace and session, and handed to the deriver (one `representation` task per peer)
 * in the same transaction, so nothing stored is ever left without its derivation work.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import { Queue, SchemaName } from "@resilience/deriver"
import { Effect } from "effect"
import type * as Model from "./Model.ts"
import * as Names from "./Names.ts"

/**
 * One message as the API receives it.
 *
 * @since 0.1.0
 */
export type NewMessage = Model.NewMessage

/**
 * What an append stored: the messages and the representation tasks enqueued for them.
 *
 * @since 0.1.0
 */
export type Appended = Model.Appended

/**
 * The task type of the representation work.
 *
 * @since 0.1.0
 */
export const representationTask = "representation"

/**
 * Stores messages of a session (creating the session on first use) and enqueues one `representation` task per
 * distinct peer, all in one transaction. The workspace must exist (the API checks its token first); otherwise
 * the foreign key fails the statement (`QueryFailed` 23503).
 *
 * @since 0.1.0
 */
export const append = (
  schema: SchemaName.SchemaName,
  workspace: string,
  session: string,
  messages: ReadonlyArray<NewMessage>
): Effect.Effect<Appended, DbError, DbSession> =>
  Effect.gen(function*() {
    if (messages.length === 0) return { stored: 0, enqueued: 0 }
    const db = yield* DbSession
    return yield* db.transaction((connection) =>
      Effect.gen(function*() {
        yield* connection.query(
          `INSERT INTO ${SchemaName.qualify(schema, "sessions")} (workspace, name) VALUES ($1, $2)
           ON CONFLICT DO NOTHING`,
          [workspace, session]
        )
        const inserted = yield* connection.query<{ n: number }>(
          `WITH inserted AS (
            INSERT INTO ${SchemaName.qualify(schema, "messages")} (workspace, session, peer, content)
            SELECT $1, $2, m.value ->> 'peer', m.value ->> 'content'
            FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS m(value, n)
            ORDER BY m.n
            RETURNING 1
          ) SELECT count(*)::int AS n FROM inserted`,
          [workspace, session, JSON.stringify(messages.map(({ content, peer }) => ({ peer, content })))]
        )
        const peers = [...new Set(messages.map((message) => message.peer))]
        const enqueued = yield* Queue.enqueue(
          connection,
          schema,
          peers.map((peer) => ({
            workUnitKey: Names.representationUnit(workspace, session, peer),
            taskType: representationTask,
            payload: { workspace, session, peer }
          }))
        )
        return { stored: inserted[0]?.n ?? 0, enqueued }
      })
    )
  }).pipe(Effect.withSpan("Messages.append", { attributes: { schema, workspace, session, count: messages.length } }))
