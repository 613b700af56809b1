/**
 * The product's tables, as versioned migrations for the deriver's `Migrator` (component `domain`).
 *
 * @since 0.1.0
 */
import { SchemaName } from "@resilience/deriver"
import type { Migrator } from "@resilience/deriver"

const t = SchemaName.qualify

/**
 * The domain migrations: workspaces (token stored hashed), sessions, messages, peer representations with their
 * term counts and per-session progress, an index of queue items by workspace for the status endpoint, and the
 * idempotency keys of writes.
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
  }
]

/**
 * The domain as a `Migrator.Component`; it runs after the queue's (its last migration indexes the queue).
 *
 * @since 0.1.0
 */
export const component: Migrator.Component = { name: "domain", migrations }
