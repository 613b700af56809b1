/**
 * The API's values as `Schema`s: what a workspace's creation returns, a new message, what an append
 * stored, a workspace's queue counts and a peer's representation. The server's domain returns these types; the
 * API contract (`@resilience/api-contract`) uses the same schemas for its payloads and responses.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"
import * as Names from "./Names.ts"

/**
 * Largest message content accepted, in characters.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxContentLength = 10_000

/**
 * A created workspace and its token (shown once; only its hash is stored).
 *
 * @since 0.1.0
 * @category schemas
 */
export const CreatedWorkspace = Schema.Struct({ name: Schema.String, token: Schema.String })

/**
 * A created workspace and its token.
 *
 * @since 0.1.0
 * @category models
 */
export type CreatedWorkspace = typeof CreatedWorkspace.Type

/**
 * One message to store: who wrote it and its content (1 to {@link maxContentLength} characters).
 *
 * @since 0.1.0
 * @category schemas
 */
export const NewMessage = Schema.Struct({
  peer: Names.PeerName.annotate({ description: "who wrote it: 1–128 characters of A–Z, a–z, 0–9, _, -, . and :" }),
  // PostgreSQL text cannot hold NUL: refused here as bad input (400), not left to fail in the database (500).
  content: Schema.String.check(
    Schema.isMinLength(1),
    Schema.isMaxLength(maxContentLength),
    Schema.makeFilter(
      (content: string) => content.includes("\u0000") ? "must not contain the NUL character (U+0000)" : true,
      {
        description: "no NUL character (U+0000)"
      }
    )
  )
})

/**
 * One message to store.
 *
 * @since 0.1.0
 * @category models
 */
export type NewMessage = typeof NewMessage.Type

/**
 * What an append stored: the messages and the representation tasks enqueued for them.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Appended = Schema.Struct({ stored: Schema.Int, enqueued: Schema.Int })

/**
 * What an append stored.
 *
 * @since 0.1.0
 * @category models
 */
export type Appended = typeof Appended.Type

/**
 * Item counts of one workspace:
 * - `pending`: unprocessed, in a unit nobody holds;
 * - `inProgress`: unprocessed, in a unit a deriver holds;
 * - `processed`: done without error;
 * - `errored`: done, marked with its handler's error;
 * - `waiting` (since 0.3.0): unprocessed, not due yet (waiting for its retry, or enqueued to run later);
 * - `dead` (since 0.3.0): dead letters, whose handler failed its last attempt (kept for a replay).
 *
 * `waiting` and `dead` are optional on the wire: a server of 0.2.0 does not send them.
 *
 * @since 0.1.0
 * @category schemas
 */
export const QueueStatus = Schema.Struct({
  pending: Schema.Int,
  inProgress: Schema.Int,
  processed: Schema.Int,
  errored: Schema.Int,
  waiting: Schema.optionalKey(Schema.Int),
  dead: Schema.optionalKey(Schema.Int)
})

/**
 * Item counts of one workspace.
 *
 * @since 0.1.0
 * @category models
 */
export type QueueStatus = typeof QueueStatus.Type

/**
 * A term and how often the peer used it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TermCount = Schema.Struct({ term: Schema.String, count: Schema.Int })

/**
 * A term and how often the peer used it.
 *
 * @since 0.1.0
 * @category models
 */
export type TermCount = typeof TermCount.Type

/**
 * A peer's representation: message and session counts, first and last message time (ISO 8601, UTC), the most
 * frequent terms and when the deriver last updated it.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Representation = Schema.Struct({
  workspace: Schema.String,
  peer: Schema.String,
  messageCount: Schema.Int,
  sessionCount: Schema.Int,
  firstSeen: Schema.String,
  lastSeen: Schema.String,
  topTerms: Schema.Array(TermCount),
  updatedAt: Schema.String
})

/**
 * A peer's representation.
 *
 * @since 0.1.0
 * @category models
 */
export type Representation = typeof Representation.Type
