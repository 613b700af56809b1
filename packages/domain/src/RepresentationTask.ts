/**
 * The `representation` task: folds the new messages of one peer in one session into the peer's
 * representation (message count, session count, first/last seen, term counts). Idempotent: per (session,
 * peer) it remembers, under a row lock, the sequence number of the last message folded in (`seq`, numbered per
 * session and peer in commit order by `Messages.store`), so a repeated or concurrent task adds nothing twice and
 * a message committed late is never passed over.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Handlers, Queue } from "@resilience/deriver"
import type { SchemaName } from "@resilience/schema"
import { Effect, Schema } from "effect"
import * as Statements from "./internal/statements/RepresentationTask.ts"
import * as Terms from "./Terms.ts"

/**
 * The payload of a `representation` task.
 *
 * @since 0.1.0
 */
export const Payload = Schema.Struct({
  workspace: Schema.String,
  session: Schema.String,
  peer: Schema.String
})

/**
 * The payload of a `representation` task.
 *
 * @since 0.1.0
 */
export type Payload = typeof Payload.Type

/**
 * A task whose payload is not a {@link Payload}: a handler failure (the item is marked with it).
 *
 * @since 0.1.0
 */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>()("InvalidPayload", {
  message: Schema.String
}) {}

const decodePayload = (payload: unknown) =>
  Schema.decodeUnknownEffect(Payload)(payload).pipe(
    Effect.mapError((error) => new InvalidPayload({ message: error.message }))
  )

/**
 * Folds the messages of `peer` in `session` that follow the last folded one (by sequence number) into the peer's
 * representation, in one transaction. Returns how many messages it folded in.
 *
 * @since 0.1.0
 */
export const derive = (
  schema: SchemaName.SchemaName,
  payload: Payload
): Effect.Effect<number, DbError, DbSession> =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const { peer, session, workspace } = payload
    return yield* db.transaction((connection) =>
      Effect.gen(function*() {
        const created = yield* connection.query(Statements.insertProgress(schema), [workspace, session, peer])
        const locked = yield* connection.query<{ last: string }>(Statements.lockProgress(schema), [
          workspace,
          session,
          peer
        ])
        const last = BigInt(locked[0]?.last ?? "0")
        const visible = yield* connection.query<{ seq: string; content: string }>(
          Statements.selectNewMessages(schema),
          [workspace, session, peer, last.toString()]
        )
        // The gap-free prefix only (appends of a peer commit in sequence order, so there is no gap to skip;
        // should one appear, what follows it waits for the next task rather than being passed over).
        const rows = visible.filter((row, i) => BigInt(row.seq) === last + BigInt(i + 1))
        const newest = rows.at(-1)
        if (newest === undefined) return 0
        yield* connection.query(Statements.foldRepresentation(schema), [
          workspace,
          session,
          peer,
          last.toString(),
          newest.seq,
          created.length > 0 ? 1 : 0
        ])
        const counts = Terms.count(rows.map((row) => row.content))
        if (counts.size > 0) {
          yield* connection.query(Statements.foldTerms(schema), [
            workspace,
            peer,
            JSON.stringify([...counts].map(([term, count]) => ({ term, count })))
          ])
        }
        yield* connection.query(Statements.advanceProgress(schema), [workspace, session, peer, newest.seq])
        return rows.length
      })
    )
  }).pipe(Effect.withSpan("Representation.derive", { attributes: { schema, ...payload } }))

/**
 * The handler of `representation` tasks for a schema.
 *
 * @since 0.1.0
 */
export const handler = (schema: SchemaName.SchemaName): Handlers.Handler<DbSession> => (item: Queue.Item) =>
  Effect.flatMap(decodePayload(item.payload), (payload) => derive(schema, payload))
