/**
 * Domain migration 2 (released in 0.2.0; frozen): peer representations, their term counts and each (session,
 * peer)'s progress.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  2,
  "peer representations",
  ({ peerRepresentations, peerSessionProgress, peerTerms, workspaces }) => [
    `CREATE TABLE ${peerRepresentations} (
        workspace text NOT NULL REFERENCES ${workspaces} (name) ON DELETE CASCADE,
        peer text NOT NULL,
        message_count bigint NOT NULL,
        session_count integer NOT NULL,
        first_seen timestamptz NOT NULL,
        last_seen timestamptz NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, peer)
      )`,
    `CREATE TABLE ${peerTerms} (
        workspace text NOT NULL,
        peer text NOT NULL,
        term text NOT NULL,
        count bigint NOT NULL,
        PRIMARY KEY (workspace, peer, term)
      )`,
    `CREATE TABLE ${peerSessionProgress} (
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        last_message_id bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (workspace, session, peer)
      )`
  ]
)
