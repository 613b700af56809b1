/**
 * Reading what the deriver derived: a peer's representation in a workspace.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Model } from "@resilience/model"
import type { SchemaName } from "@resilience/schema"
import { Effect, Option } from "effect"
import * as Statements from "./internal/statements/Representations.ts"

/**
 * A term and how often the peer used it.
 *
 * @since 0.1.0
 */
export type TermCount = Model.TermCount

/**
 * A peer's representation: message and session counts, first and last message time (ISO 8601, UTC), the most
 * frequent terms and when the deriver last updated it.
 *
 * @since 0.1.0
 */
export type Representation = Model.Representation

/**
 * How many terms a representation lists.
 *
 * @since 0.1.0
 */
export const topTermCount = 10

/**
 * The representation of `peer` in `workspace`, or none if the deriver has not derived one (yet).
 *
 * @since 0.1.0
 */
export const get = (
  schema: SchemaName.SchemaName,
  workspace: string,
  peer: string
): Effect.Effect<Option.Option<Representation>, DbError, DbSession> =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const rows = yield* db.query<{
      message_count: number
      session_count: number
      first_seen: string
      last_seen: string
      updated_at: string
      top_terms: string
    }>(Statements.selectRepresentation(schema), [workspace, peer, topTermCount])
    const row = rows[0]
    if (row === undefined) return Option.none()
    return Option.some({
      workspace,
      peer,
      messageCount: Number(row.message_count),
      sessionCount: Number(row.session_count),
      firstSeen: row.first_seen,
      lastSeen: row.last_seen,
      topTerms: (JSON.parse(row.top_terms) as ReadonlyArray<{ term: string; count: number }>).map((t) => ({
        term: t.term,
        count: Number(t.count)
      })),
      updatedAt: row.updated_at
    })
  }).pipe(Effect.withSpan("Representations.get", { attributes: { schema, workspace, peer } }))
