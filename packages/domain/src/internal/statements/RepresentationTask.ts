/**
 * The statements of `RepresentationTask`: one fold of a peer's messages in a session, `$1` the workspace, `$2` the
 * session and `$3` the peer (the representation's two statements, keyed by workspace and peer, say theirs).
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/** The (session, peer)'s progress row, created on its first fold; one row when created. */
export const insertProgress = perSchema(({ peerSessionProgress }) =>
  `INSERT INTO ${peerSessionProgress} (workspace, session, peer) VALUES ($1, $2, $3)
ON CONFLICT DO NOTHING RETURNING 1`
)

/** The sequence number of the last message folded in (`last`, as text), its row locked until commit. */
export const lockProgress = perSchema(({ peerSessionProgress }) =>
  `SELECT last_seq::text AS last FROM ${peerSessionProgress}
WHERE workspace = $1 AND session = $2 AND peer = $3 FOR UPDATE`
)

/** The messages after sequence number `$4`, in order (`seq` as text, `content`). */
export const selectNewMessages = perSchema(({ messages }) =>
  `SELECT m.seq::text AS seq, m.content FROM ${messages} m
WHERE m.workspace = $1 AND m.session = $2 AND m.peer = $3 AND m.seq > $4::bigint ORDER BY m.seq`
)

/**
 * Folds the messages numbered `$4` (exclusive) to `$5` (inclusive) into the peer's representation, with `$6`
 * sessions more (1 on a session's first fold, else 0).
 */
export const foldRepresentation = perSchema(({ messages, peerRepresentations }) =>
  `INSERT INTO ${peerRepresentations} AS r
  (workspace, peer, message_count, session_count, first_seen, last_seen, updated_at)
SELECT $1, $3, count(*), $6::int, min(created_at), max(created_at), now()
FROM ${messages}
WHERE workspace = $1 AND session = $2 AND peer = $3 AND seq > $4::bigint AND seq <= $5::bigint
ON CONFLICT (workspace, peer) DO UPDATE SET
  message_count = r.message_count + excluded.message_count,
  session_count = r.session_count + excluded.session_count,
  first_seen = least(r.first_seen, excluded.first_seen),
  last_seen = greatest(r.last_seen, excluded.last_seen),
  updated_at = now()`
)

/** Adds term counts `$3` (a JSON array of `{ term, count }`) to peer `$2` of workspace `$1`, in term order. */
export const foldTerms = perSchema(({ peerTerms }) =>
  `INSERT INTO ${peerTerms} AS p (workspace, peer, term, count)
SELECT $1, $2, t.term, t.count FROM jsonb_to_recordset($3::jsonb) AS t(term text, count bigint)
ORDER BY t.term
ON CONFLICT (workspace, peer, term) DO UPDATE SET count = p.count + excluded.count`
)

/** The (session, peer)'s last folded sequence number, now `$4`. */
export const advanceProgress = perSchema(({ peerSessionProgress }) =>
  `UPDATE ${peerSessionProgress} SET last_seq = $4::bigint WHERE workspace = $1 AND session = $2 AND peer = $3`
)
