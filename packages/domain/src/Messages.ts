/**
 * Messages: stored per workspace and session, and handed to the deriver (one `representation` task per peer)
 * in the same transaction, so nothing stored is ever left without its derivation work.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { Connection, DbError } from "@resilience/db-session"
import { Enqueue } from "@resilience/deriver"
import type { Model } from "@resilience/model"
import type { SchemaName } from "@resilience/schema"
import { Effect } from "effect"
import * as Idempotency from "./Idempotency.ts"
import * as Statements from "./internal/statements/Messages.ts"
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
 * Options of an append.
 *
 * @since 0.3.0
 */
export interface AppendOptions {
  /**
   * The earliest time the append's representation tasks run (epoch milliseconds or a `Date`); default: at once.
   * An earlier task of the same peer still folds whatever is committed when it runs.
   */
  readonly deriveAt?: number | Date | undefined
}

/**
 * Stores messages of a session (creating the session on first use) and enqueues one `representation` task per
 * distinct peer (to run no earlier than `options.deriveAt`), on the caller's connection (inside its transaction). The workspace must exist (the API checks
 * its token first); otherwise the foreign key fails the statement (`QueryFailed` 23503).
 *
 * @since 0.1.0
 */
export const store = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  workspace: string,
  session: string,
  messages: ReadonlyArray<NewMessage>,
  options: AppendOptions = {}
): Effect.Effect<Appended, DbError> =>
  Effect.gen(function*() {
    yield* connection.query(Statements.insertSession(schema), [workspace, session])
    const peers = [...new Set(messages.map((message) => message.peer))]
    const enqueued = yield* Enqueue.enqueue(
      connection,
      schema,
      peers.map((peer) => ({
        workUnitKey: Names.representationUnit(workspace, session, peer),
        taskType: representationTask,
        payload: { workspace, session, peer },
        runAt: options.deriveAt
      }))
    )
    // Each peer's counter row is bumped by its message count (rows locked in peer order, so two appends of
    // several peers cannot deadlock) and held until commit: the appends of one (session, peer) commit in the
    // order of their sequence numbers, which the representation task folds by. The last statement of the append
    // (after the enqueue), so that appends of one peer wait on each other for as short a time as possible.
    const inserted = yield* connection.query<{ n: number }>(Statements.insertMessages(schema), [
      workspace,
      session,
      JSON.stringify(messages.map(({ content, peer }) => ({ peer, content })))
    ])
    return { stored: inserted[0]?.n ?? 0, enqueued }
  })

/**
 * Stores messages and enqueues their representation tasks in one transaction (see {@link store}).
 *
 * @since 0.1.0
 */
export const append = (
  schema: SchemaName.SchemaName,
  workspace: string,
  session: string,
  messages: ReadonlyArray<NewMessage>,
  options: AppendOptions = {}
): Effect.Effect<Appended, DbError, DbSession> =>
  Effect.gen(function*() {
    if (messages.length === 0) return { stored: 0, enqueued: 0 }
    const db = yield* DbSession
    return yield* db.transaction((connection) => store(connection, schema, workspace, session, messages, options))
  }).pipe(Effect.withSpan("Messages.append", { attributes: { schema, workspace, session, count: messages.length } }))

/**
 * {@link append} under an `Idempotency-Key`: the same key with the same session and messages within
 * `retentionSeconds` stores nothing new and answers the first request's result (`replayed: true`); the same
 * key with another request fails with `IdempotencyKeyReused`.
 *
 * @since 0.1.0
 */
export const appendOnce = (
  schema: SchemaName.SchemaName,
  workspace: string,
  session: string,
  messages: ReadonlyArray<NewMessage>,
  idempotency: { readonly key: string; readonly retentionSeconds: number },
  options: AppendOptions = {}
): Effect.Effect<Idempotency.Outcome<Appended>, DbError | Idempotency.IdempotencyKeyReused, DbSession> =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const key: Idempotency.Key = {
      workspace,
      key: idempotency.key,
      fingerprint: Idempotency.fingerprint({
        session,
        messages: messages.map(({ content, peer }) => ({ peer, content })),
        // part of the request only when given, so keys of requests without it keep their fingerprints
        ...(options.deriveAt === undefined ? {} : { deriveAt: Number(options.deriveAt) })
      }),
      retentionSeconds: idempotency.retentionSeconds
    }
    return yield* db.transaction((connection) =>
      Idempotency.once(connection, schema, key, store(connection, schema, workspace, session, messages, options))
    )
  }).pipe(
    Effect.withSpan("Messages.appendOnce", { attributes: { schema, workspace, session, count: messages.length } })
  )
