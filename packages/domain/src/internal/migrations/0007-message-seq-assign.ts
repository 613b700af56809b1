/**
 * Domain migration 7 (unreleased: it may change until 0.3.0 ships, then it is frozen like the others): the message
 * sequence for writers that do not number their rows.
 *
 * Expand for migration 6 (issue #36): its NOT NULL `seq` refused every insert of a writer built before it (such a
 * pod still serves while the migration Job runs). A row inserted without `seq` now takes the next number from the
 * same counter row, locked until commit as `Messages.store` locks it, so the numbering stays gap-free and in
 * commit order; writers that number (every build since 6) never fire it.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(
  7,
  "message sequence for writers that do not number",
  ({ messageSeq, messageSeqAssign, messages }) => [
    `CREATE FUNCTION ${messageSeqAssign}() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         INSERT INTO ${messageSeq} AS s (workspace, session, peer, last_seq)
           VALUES (NEW.workspace, NEW.session, NEW.peer, 1)
         ON CONFLICT (workspace, session, peer) DO UPDATE SET last_seq = s.last_seq + 1
         RETURNING last_seq INTO NEW.seq;
         RETURN NEW;
       END $$`,
    `CREATE TRIGGER message_seq_assign BEFORE INSERT ON ${messages}
        FOR EACH ROW WHEN (NEW.seq IS NULL) EXECUTE FUNCTION ${messageSeqAssign}()`
  ]
)
