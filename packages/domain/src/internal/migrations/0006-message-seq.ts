/**
 * Domain migration 6 (released in 0.2.0; frozen): a per-(session, peer) message sequence.
 *
 * Ids are drawn at insert, not at commit: an append can commit after a later id was folded in, and a watermark of
 * ids skips it for ever (issue #21). Each (session, peer) now numbers its messages 1, 2, 3, … from a counter row
 * that the append updates in its own transaction: the row lock orders the appends of one peer by commit, and a
 * rolled-back append returns its numbers, so a fold by `seq` sees a gap-free prefix.
 * `peer_session_progress.last_message_id` is no longer maintained; `last_seq` replaces it.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  6,
  "per-peer message sequence",
  ({ messageSeq, messages, peerSessionProgress, sessions }) => [
    `ALTER TABLE ${messages} ADD COLUMN seq bigint`,
    `UPDATE ${messages} m SET seq = n.seq
        FROM (SELECT id, row_number() OVER (PARTITION BY workspace, session, peer ORDER BY id) AS seq
              FROM ${messages}) n
        WHERE m.id = n.id`,
    `ALTER TABLE ${messages} ALTER COLUMN seq SET NOT NULL`,
    `CREATE UNIQUE INDEX messages_peer_seq_idx ON ${messages} (workspace, session, peer, seq)`,
    `CREATE TABLE ${messageSeq} (
        workspace text NOT NULL,
        session text NOT NULL,
        peer text NOT NULL,
        last_seq bigint NOT NULL,
        PRIMARY KEY (workspace, session, peer),
        FOREIGN KEY (workspace, session) REFERENCES ${sessions} (workspace, name) ON DELETE CASCADE
      )`,
    `INSERT INTO ${messageSeq} (workspace, session, peer, last_seq)
        SELECT workspace, session, peer, max(seq) FROM ${messages} GROUP BY 1, 2, 3`,
    `ALTER TABLE ${peerSessionProgress} ADD COLUMN last_seq bigint NOT NULL DEFAULT 0`,
    // What the id watermark covered, in sequence numbers (a message it skipped stays skipped: not knowable).
    `UPDATE ${peerSessionProgress} p SET last_seq = coalesce((
         SELECT max(m.seq) FROM ${messages} m
         WHERE m.workspace = p.workspace AND m.session = p.session AND m.peer = p.peer AND m.id <= p.last_message_id
       ), 0)`
  ]
)
