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
import { SchemaName } from "@resilience/schema"
import { Effect, Schema } from "effect"
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
    const progress = SchemaName.qualify(schema, "peer_session_progress")
    const messages = SchemaName.qualify(schema, "messages")
    return yield* db.transaction((connection) =>
      Effect.gen(function*() {
        const created = yield* connection.query(
          `INSERT INTO ${progress} (workspace, session, peer) VALUES ($1, $2, $3)
           ON CONFLICT DO NOTHING RETURNING 1`,
          [workspace, session, peer]
        )
        const locked = yield* connection.query<{ last: string }>(
          `SELECT last_seq::text AS last FROM ${progress}
           WHERE workspace = $1 AND session = $2 AND peer = $3 FOR UPDATE`,
          [workspace, session, peer]
        )
        const last = BigInt(locked[0]?.last ?? "0")
        const visible = yield* connection.query<{ seq: string; content: string }>(
          `SELECT m.seq::text AS seq, m.content FROM ${messages} m
           WHERE m.workspace = $1 AND m.session = $2 AND m.peer = $3 AND m.seq > $4::bigint ORDER BY m.seq`,
          [workspace, session, peer, last.toString()]
        )
        // The gap-free prefix only (appends of a peer commit in sequence order, so there is no gap to skip;
        // should one appear, what follows it waits for the next task rather than being passed over).
        const rows = visible.filter((row, i) => BigInt(row.seq) === last + BigInt(i + 1))
        const newest = rows.at(-1)
        if (newest === undefined) return 0
        yield* connection.query(
          `INSERT INTO ${SchemaName.qualify(schema, "peer_representations")} AS r
             (workspace, peer, message_count, session_count, first_seen, last_seen, updated_at)
           SELECT $1, $3, count(*), $6::int, min(created_at), max(created_at), now()
           FROM ${messages}
           WHERE workspace = $1 AND session = $2 AND peer = $3 AND seq > $4::bigint AND seq <= $5::bigint
           ON CONFLICT (workspace, peer) DO UPDATE SET
             message_count = r.message_count + excluded.message_count,
             session_count = r.session_count + excluded.session_count,
             first_seen = least(r.first_seen, excluded.first_seen),
             last_seen = greatest(r.last_seen, excluded.last_seen),
             updated_at = now()`,
          [workspace, session, peer, last.toString(), newest.seq, created.length > 0 ? 1 : 0]
        )
        const counts = Terms.count(rows.map((row) => row.content))
        if (counts.size > 0) {
          yield* connection.query(
            `INSERT INTO ${SchemaName.qualify(schema, "peer_terms")} AS p (workspace, peer, term, count)
             SELECT $1, $2, t.term, t.count FROM jsonb_to_recordset($3::jsonb) AS t(term text, count bigint)
             ORDER BY t.term
             ON CONFLICT (workspace, peer, term) DO UPDATE SET count = p.count + excluded.count`,
            [workspace, peer, JSON.stringify([...counts].map(([term, count]) => ({ term, count })))]
          )
        }
        yield* connection.query(
          `UPDATE ${progress} SET last_seq = $4::bigint WHERE workspace = $1 AND session = $2 AND peer = $3`,
          [workspace, session, peer, newest.seq]
        )
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
