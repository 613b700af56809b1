/**
 * The qualified names of the domain's tables and functions in one tenant schema (and of the queue's two tables it
 * reads), and a statement text made once per schema. Every SQL text of the domain (its migrations and the
 * statements the API and the representation task send) names its objects through these. (The work unit keys are
 * `../Names.ts`.)
 *
 * @internal
 */
import { Migrator, SchemaName } from "@resilience/schema"

/** The domain's objects in one schema, quoted and qualified. */
export interface Names {
  readonly workspaces: string
  readonly sessions: string
  readonly messages: string
  /** Each (session, peer)'s last message sequence number (migration 6). */
  readonly messageSeq: string
  /** The trigger function numbering a message inserted without `seq` (migration 7). */
  readonly messageSeqAssign: string
  readonly peerRepresentations: string
  readonly peerTerms: string
  readonly peerSessionProgress: string
  readonly idempotencyKeys: string
  /** Processed and errored items per workspace, kept by triggers (migration 5). */
  readonly queueCounts: string
  /** The trigger function counting newly processed rows of an update (migration 5). */
  readonly queueCountUpdated: string
  /** The trigger function counting processed rows inserted as such (migration 5). */
  readonly queueCountInserted: string
  /** The deriver's items. */
  readonly queue: string
  /** The deriver's ownership rows. */
  readonly queueSessions: string
}

/** The domain's objects in `schema`. */
export const names = (schema: SchemaName.SchemaName): Names => ({
  workspaces: SchemaName.qualify(schema, "workspaces"),
  sessions: SchemaName.qualify(schema, "sessions"),
  messages: SchemaName.qualify(schema, "messages"),
  messageSeq: SchemaName.qualify(schema, "message_seq"),
  messageSeqAssign: SchemaName.qualify(schema, "message_seq_assign"),
  peerRepresentations: SchemaName.qualify(schema, "peer_representations"),
  peerTerms: SchemaName.qualify(schema, "peer_terms"),
  peerSessionProgress: SchemaName.qualify(schema, "peer_session_progress"),
  idempotencyKeys: SchemaName.qualify(schema, "idempotency_keys"),
  queueCounts: SchemaName.qualify(schema, "queue_counts"),
  queueCountUpdated: SchemaName.qualify(schema, "queue_count_updated"),
  queueCountInserted: SchemaName.qualify(schema, "queue_count_inserted"),
  queue: SchemaName.qualify(schema, "queue"),
  queueSessions: SchemaName.qualify(schema, "active_queue_sessions")
})

/** Domain migration `version`, `name`: its statements, written from a schema's domain names. */
export const migration = Migrator.withNames(names)

/** A statement: its text for a schema, made on first use and kept (one entry per schema the process uses). */
export type Statement = (schema: SchemaName.SchemaName) => string

/** The statement `make` writes from a schema's names. */
export const perSchema = (make: (names: Names) => string): Statement => {
  const made = new Map<SchemaName.SchemaName, string>()
  return (schema) => {
    const known = made.get(schema)
    if (known !== undefined) return known
    const text = make(names(schema))
    made.set(schema, text)
    return text
  }
}
