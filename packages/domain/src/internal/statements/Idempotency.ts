/**
 * The statements of `Idempotency`.
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/**
 * Claims key `$2` of workspace `$1` for a request of fingerprint `$3`: inserted, or taken over when the stored one
 * is older than `$4` seconds (the retention window). One row when claimed; none when the key is held (a
 * concurrent claim waits on the key's row until the holder commits or rolls back).
 */
export const claimKey = perSchema(({ idempotencyKeys }) =>
  `INSERT INTO ${idempotencyKeys} AS k (workspace, key, fingerprint) VALUES ($1, $2, $3)
ON CONFLICT (workspace, key) DO UPDATE
  SET fingerprint = EXCLUDED.fingerprint, response = NULL, created_at = now()
  WHERE k.created_at < now() - make_interval(secs => $4::float8)
RETURNING 1`
)

/** Records response `$3` (JSON) of key `$2` of workspace `$1`. */
export const recordResponse = perSchema(({ idempotencyKeys }) =>
  `UPDATE ${idempotencyKeys} SET response = $3::jsonb WHERE workspace = $1 AND key = $2`
)

/** The fingerprint and recorded response (JSON text) of key `$2` of workspace `$1`. */
export const selectKey = perSchema(({ idempotencyKeys }) =>
  `SELECT fingerprint, response::text AS response FROM ${idempotencyKeys} WHERE workspace = $1 AND key = $2`
)

/** Deletes up to `$2` keys older than `$1` seconds that nobody holds locked; one row per key deleted. */
export const pruneKeys = perSchema(({ idempotencyKeys }) =>
  `DELETE FROM ${idempotencyKeys} WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM ${idempotencyKeys} WHERE created_at < now() - make_interval(secs => $1::float8)
  LIMIT $2 FOR UPDATE SKIP LOCKED
)) RETURNING 1`
)
