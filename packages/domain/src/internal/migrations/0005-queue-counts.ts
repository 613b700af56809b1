/**
 * Domain migration 5 (released in 0.2.0; frozen): the queue status without a scan of history. Pending and
 * in-progress items of a workspace through a partial index of the backlog; processed and errored items from
 * counters kept by statement-level triggers (one upsert per statement and workspace, so a batch record costs one),
 * backfilled from the history once.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

/**
 * The statement-level trigger function `fn` adding the statement's newly processed rows (`newly`, filtered further
 * by `onlyNewly`) to `queueCounts`. The two functions below differ only in these.
 */
const countFunction = (fn: string, queueCounts: string, onlyNewly: string) =>
  `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO ${queueCounts} AS c (workspace, processed, errored)
       SELECT n.payload ->> 'workspace', count(*) FILTER (WHERE n.error IS NULL), count(*) FILTER (WHERE n.error IS NOT NULL)
       FROM newly n WHERE n.processed AND n.payload ? 'workspace' ${onlyNewly}
       GROUP BY 1
     ON CONFLICT (workspace) DO UPDATE
       SET processed = c.processed + EXCLUDED.processed, errored = c.errored + EXCLUDED.errored;
     RETURN NULL;
   END $$`

export const migration: Migrator.Migration = Names.migration(
  5,
  "queue status without a scan of history",
  ({ queue, queueCountInserted, queueCountUpdated, queueCounts }) => [
    `CREATE INDEX queue_unprocessed_workspace_idx ON ${queue} ((payload ->> 'workspace'))
        WHERE NOT processed`,
    `CREATE TABLE ${queueCounts} (
        workspace text PRIMARY KEY,
        processed bigint NOT NULL DEFAULT 0,
        errored bigint NOT NULL DEFAULT 0
      )`,
    `INSERT INTO ${queueCounts} (workspace, processed, errored)
        SELECT payload ->> 'workspace', count(*) FILTER (WHERE error IS NULL), count(*) FILTER (WHERE error IS NOT NULL)
        FROM ${queue} WHERE processed AND payload ? 'workspace' GROUP BY 1`,
    // An update counts the rows it processes, not those that were processed before it.
    countFunction(
      queueCountUpdated,
      queueCounts,
      "AND NOT EXISTS (SELECT 1 FROM before b WHERE b.id = n.id AND b.processed)"
    ),
    countFunction(queueCountInserted, queueCounts, ""),
    `CREATE TRIGGER queue_count_updated AFTER UPDATE ON ${queue}
        REFERENCING OLD TABLE AS before NEW TABLE AS newly
        FOR EACH STATEMENT EXECUTE FUNCTION ${queueCountUpdated}()`,
    `CREATE TRIGGER queue_count_inserted AFTER INSERT ON ${queue}
        REFERENCING NEW TABLE AS newly
        FOR EACH STATEMENT EXECUTE FUNCTION ${queueCountInserted}()`
  ]
)
