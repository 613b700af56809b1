/**
 * The statements of `Messages`.
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/** Session `$2` of workspace `$1`, created on first use. */
export const insertSession = perSchema(({ sessions }) =>
  `INSERT INTO ${sessions} (workspace, name) VALUES ($1, $2)
ON CONFLICT DO NOTHING`
)

/**
 * Stores messages `$3` (a JSON array of `{ peer, content }`) of session `$2` in workspace `$1`, numbered per peer:
 * each peer's counter row is bumped by its message count (rows locked in peer order, so two appends of several
 * peers cannot deadlock) and held until commit, and its messages take the numbers it skipped, in order. Returns
 * `n`, how many it stored.
 */
export const insertMessages = perSchema(({ messageSeq, messages }) =>
  `WITH input AS (
  SELECT m.value ->> 'peer' AS peer, m.value ->> 'content' AS content, m.n
  FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS m(value, n)
), numbered AS (
  INSERT INTO ${messageSeq} AS s (workspace, session, peer, last_seq)
  SELECT $1, $2, peer, count(*) FROM input GROUP BY peer ORDER BY peer
  ON CONFLICT (workspace, session, peer) DO UPDATE SET last_seq = s.last_seq + excluded.last_seq
  RETURNING peer, last_seq
), inserted AS (
  INSERT INTO ${messages} (workspace, session, peer, content, seq)
  SELECT $1, $2, i.peer, i.content,
    c.last_seq - count(*) OVER (PARTITION BY i.peer) + row_number() OVER (PARTITION BY i.peer ORDER BY i.n)
  FROM input i JOIN numbered c USING (peer)
  ORDER BY i.n
  RETURNING 1
) SELECT count(*)::int AS n FROM inserted`
)
