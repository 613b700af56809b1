/**
 * The product's tables, as versioned migrations for `Migrator` of `@resilience/schema` (component `domain`).
 *
 * @since 0.1.0
 */
import { SchemaName } from "@resilience/schema"
import type { Migrator } from "@resilience/schema"

const t = SchemaName.qualify

/** A statement-level trigger function adding the statement's newly processed rows to `queue_counts`. */
const countFunction = (schema: SchemaName.SchemaName, name: string, onlyNewly: string) =>
  `CREATE FUNCTION ${t(schema, name)}() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO ${t(schema, "queue_counts")} AS c (workspace, processed, errored)
       SELECT n.payload ->> 'workspace', count(*) FILTER (WHERE n.error IS NULL), count(*) FILTER (WHERE n.error IS NOT NULL)
       FROM newly n WHERE n.processed AND n.payload ? 'workspace' ${onlyNewly}
       GROUP BY 1
     ON CONFLICT (workspace) DO UPDATE
       SET processed = c.processed + EXCLUDED.processed, errored = c.errored + EXCLUDED.errored;
     RETURN NULL;
   END $$`

/**
 * The domain migrations: workspaces (token stored hashed), sessions, messages, peer representations with their
 * term counts and per-session progress, an index of queue items by workspace for the status endpoint, the
 * idempotency keys of writes, the status counts without a scan of history (a partial index of the backlog
 * by workspace, counters of processed and errored items kept by triggers), a gap-free sequence per session
 * and peer that orders messages by commit, and that sequence drawn for a writer that does not number its rows.
 *
 * @since 0.1.0
 */
export const migrations: ReadonlyArray<Migrator.Migration> = [
  {
    version: 1,
    name: "workspaces, sessions, messages",
    up: (schema) => [
      `CREATE TABLE ${t(schema, "workspaces")} (
        name text PRIMARY KEY,
        token_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      `CREATE TABLE ${t(schema, "sessions")} (
        workspace text NOT NULL REFERENCES ${t(schema, "workspaces")} (name) ON DELETE CASCADE,
        name text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, name)
      )`,
      `CREATE TABLE ${t(schema, "messages")} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        content text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (workspace, session) REFERENCES ${t(schema, "sessions")} (workspace, name) ON DELETE CASCADE
      )`,
      `CREATE INDEX messages_peer_idx ON ${t(schema, "messages")} (workspace, session, peer, id)`
    ]
  },
  {
    version: 2,
    name: "peer representations",
    up: (schema) => [
      `CREATE TABLE ${t(schema, "peer_representations")} (
        workspace text NOT NULL REFERENCES ${t(schema, "workspaces")} (name) ON DELETE CASCADE,
        peer text NOT NULL,
        message_count bigint NOT NULL,
        session_count integer NOT NULL,
        first_seen timestamptz NOT NULL,
        last_seen timestamptz NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, peer)
      )`,
      `CREATE TABLE ${t(schema, "peer_terms")} (
        workspace text NOT NULL,
        peer text NOT NULL,
        term text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (workspace, peer, term)
      )`,
      `CREATE TABLE ${t(schema, "peer_session_progress")} (
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        last_message_id bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (workspace, session, peer)
      )`
    ]
  },
  {
    version: 3,
    name: "queue items by workspace",
    up: (schema) => [
      `CREATE INDEX queue_workspace_idx ON ${t(schema, "queue")} ((payload ->> 'workspace'))`
    ]
  },
  {
    version: 4,
    name: "idempotency keys",
    up: (schema) => [
      `CREATE TABLE ${t(schema, "idempotency_keys")} (
        workspace text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        response jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, key)
      )`,
      `CREATE INDEX idempotency_keys_created_at_idx ON ${t(schema, "idempotency_keys")} (created_at)`
    ]
  },
  {
    version: 5,
    name: "queue status without a scan of history",
    up: (schema) => [
      // Pending and in-progress items of a workspace: a partial index of unprocessed rows (the backlog).
      `CREATE INDEX queue_unprocessed_workspace_idx ON ${t(schema, "queue")} ((payload ->> 'workspace'))
        WHERE NOT processed`,
      // Processed and errored items per workspace: counters kept by statement-level triggers (one upsert per
      // statement and workspace, so a batch record costs one), backfilled from the history once.
      `CREATE TABLE ${t(schema, "queue_counts")} (
        workspace text PRIMARY KEY,
        processed bigint NOT NULL DEFAULT 0,
        errored bigint NOT NULL DEFAULT 0
      )`,
      `INSERT INTO ${t(schema, "queue_counts")} (workspace, processed, errored)
        SELECT payload ->> 'workspace', count(*) FILTER (WHERE error IS NULL), count(*) FILTER (WHERE error IS NOT NULL)
        FROM ${t(schema, "queue")} WHERE processed AND payload ? 'workspace' GROUP BY 1`,
      countFunction(
        schema,
        "queue_count_updated",
        "AND NOT EXISTS (SELECT 1 FROM before b WHERE b.id = n.id AND b.processed)"
      ),
      countFunction(schema, "queue_count_inserted", ""),
      `CREATE TRIGGER queue_count_updated AFTER UPDATE ON ${t(schema, "queue")}
        REFERENCING OLD TABLE AS before NEW TABLE AS newly
        FOR EACH STATEMENT EXECUTE FUNCTION ${t(schema, "queue_count_updated")}()`,
      `CREATE TRIGGER queue_count_inserted AFTER INSERT ON ${t(schema, "queue")}
        REFERENCING NEW TABLE AS newly
        FOR EACH STATEMENT EXECUTE FUNCTION ${t(schema, "queue_count_inserted")}()`
    ]
  },
  {
    version: 6,
    name: "per-peer message sequence",
    // Ids are drawn at insert, not at commit: an append can commit after a later id was folded in, and a
    // watermark of ids skips it for ever (issue #21). Each (session, peer) now numbers its messages 1, 2, 3, …
    // from a counter row that the append updates in its own transaction: the row lock orders the appends of
    // one peer by commit, and a rolled-back append returns its numbers, so a fold by `seq` sees a gap-free
    // prefix. `peer_session_progress.last_message_id` is no longer maintained; `last_seq` replaces it.
    up: (schema) => [
      `ALTER TABLE ${t(schema, "messages")} ADD COLUMN seq bigint`,
      `UPDATE ${t(schema, "messages")} m SET seq = n.seq
        FROM (SELECT id, row_number() OVER (PARTITION BY workspace, session, peer ORDER BY id) AS seq
              FROM ${t(schema, "messages")}) n
        WHERE m.id = n.id`,
      `ALTER TABLE ${t(schema, "messages")} ALTER COLUMN seq SET NOT NULL`,
      `CREATE UNIQUE INDEX messages_peer_seq_idx ON ${t(schema, "messages")} (workspace, session, peer, seq)`,
      `CREATE TABLE ${t(schema, "message_seq")} (
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        last_seq bigint NOT NULL,
        PRIMARY KEY (workspace, session, peer),
        FOREIGN KEY (workspace, session) REFERENCES ${t(schema, "sessions")} (workspace, name) ON DELETE CASCADE
      )`,
      `INSERT INTO ${t(schema, "message_seq")} (workspace, session, peer, last_seq)
        SELECT workspace, session, peer, max(seq) FROM ${t(schema, "messages")} GROUP BY 1, 2, 3`,
      `ALTER TABLE ${t(schema, "peer_session_progress")} ADD COLUMN last_seq bigint NOT NULL DEFAULT 0`,
      // What the id watermark covered, in sequence numbers (a message it skipped stays skipped: not knowable).
      `UPDATE ${t(schema, "peer_session_progress")} p SET last_seq = coalesce((
         SELECT max(m.seq) FROM ${t(schema, "messages")} m
         WHERE m.workspace = p.workspace AND m.session = p.session AND m.peer = p.peer AND m.id <= p.last_message_id
       ), 0)`
    ]
  },
  {
    version: 7,
    name: "message sequence for writers that do not number",
    // Expand for migration 6 (issue #36): its NOT NULL `seq` refused every insert of a writer built before it
    // (such a pod still serves while the migration Job runs). A row inserted without `seq` now takes the next
    // number from the same counter row, locked until commit as `Messages.store` locks it, so the numbering stays
    // gap-free and in commit order; writers that number (every build since 6) never fire it.
    up: (schema) => [
      `CREATE FUNCTION ${t(schema, "message_seq_assign")}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO ${t(schema, "message_seq")} AS s (workspace, session, peer, last_seq)
           VALUES (NEW.workspace, NEW.session, NEW.peer, 1)
         ON CONFLICT (workspace, session, peer) DO UPDATE SET last_seq = s.last_seq + 1
         RETURNING last_seq INTO NEW.seq;
         RETURN NEW;
       END $$`,
      `CREATE TRIGGER message_seq_assign BEFORE INSERT ON ${t(schema, "messages")}
        FOR EACH ROW WHEN (NEW.seq IS NULL) EXECUTE FUNCTION ${t(schema, "message_seq_assign")}()`
    ]
  }
]

/**
 * The domain as a `Migrator.Component`; it runs after the queue's (its last migration indexes the queue).
 *
 * @since 0.1.0
 */
export const component: Migrator.Component = { name: "domain", migrations }
