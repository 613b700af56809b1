/**
 * Domain migration 1 (released in 0.2.0; frozen): workspaces (the token stored hashed), sessions and messages.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  1,
  "workspaces, sessions, messages",
  ({ messages, sessions, workspaces }) => [
    `CREATE TABLE ${workspaces} (
        name text PRIMARY KEY,
        token_hash text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
    `CREATE TABLE ${sessions} (
        workspace text NOT NULL REFERENCES ${workspaces} (name) ON DELETE CASCADE,
        name text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, name)
      )`,
    `CREATE TABLE ${messages} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        content text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        FOREIGN KEY (workspace, session) REFERENCES ${sessions} (workspace, name) ON DELETE CASCADE
      )`,
    `CREATE INDEX messages_peer_idx ON ${messages} (workspace, session, peer, id)`
  ]
)
