/**
 * The statements of `Representations`.
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/**
 * The representation of peer `$2` in workspace `$1`, its times as ISO 8601 in UTC and its `$3` most frequent terms
 * as a JSON array of `{ term, count }` (no row: none derived yet).
 */
export const selectRepresentation = perSchema(({ peerRepresentations, peerTerms }) =>
  `SELECT r.message_count::float8 AS message_count, r.session_count,
  to_char(r.first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS first_seen,
  to_char(r.last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last_seen,
  to_char(r.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS updated_at,
  coalesce((
    SELECT jsonb_agg(jsonb_build_object('term', t.term, 'count', t.count) ORDER BY t.count DESC, t.term)
    FROM (
      SELECT term, count FROM ${peerTerms}
      WHERE workspace = $1 AND peer = $2 ORDER BY count DESC, term LIMIT $3
    ) t
  ), '[]'::jsonb)::text AS top_terms
FROM ${peerRepresentations} r
WHERE r.workspace = $1 AND r.peer = $2`
)
