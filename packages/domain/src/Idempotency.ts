/**
 * Idempotency keys: a client that did not learn whether a write happened (a 503, a timeout, a dropped
 * connection) sends it again with the same `Idempotency-Key`, and the write happens once. The key is claimed
 * with `INSERT … ON CONFLICT` in the write's own transaction, so:
 *
 * - the first request stores the key, does the write and records its response, all or nothing;
 * - a duplicate arriving while the first is in flight waits on the key's row (PostgreSQL's unique index) and,
 *   once the first commits, answers the recorded response; if the first rolled back, the duplicate is first;
 * - the same key with a different request (another body, another session) is refused: `IdempotencyKeyReused`;
 * - a key older than the retention window counts as absent (the request is new), and `prune` deletes such
 *   keys in small batches.
 *
 * @since 0.1.0
 */
import type { Connection, DbError } from "@resilience/db-session"
import { DbSession } from "@resilience/db-session"
import { Jitter } from "@resilience/jitter"
import type { SchemaName } from "@resilience/schema"
import { Data, Duration, Effect } from "effect"
import { createHash } from "node:crypto"
import * as Statements from "./internal/statements/Idempotency.ts"

/**
 * The same key was used for a different request within the retention window (answered 422).
 *
 * @since 0.1.0
 */
export class IdempotencyKeyReused extends Data.TaggedError("IdempotencyKeyReused")<{ readonly key: string }> {}

/**
 * One key of one workspace, the fingerprint of the request it names, and how long it is remembered.
 *
 * @since 0.1.0
 */
export interface Key {
  readonly workspace: string
  readonly key: string
  /** A digest of everything that makes the request what it is (see {@link fingerprint}). */
  readonly fingerprint: string
  readonly retentionSeconds: number
}

/**
 * A digest of a request: SHA-256 of its JSON.
 *
 * @since 0.1.0
 */
export const fingerprint = (request: unknown): string =>
  createHash("sha256").update(JSON.stringify(request)).digest("hex")

/**
 * What became of a keyed write: done now, or answered from the first request's record.
 *
 * @since 0.1.0
 */
export interface Outcome<A> {
  readonly replayed: boolean
  readonly response: A
}

/**
 * Runs `write` once per key, inside the caller's transaction on `connection` (see the module comment):
 * `response` must be JSON (it is recorded as jsonb and answered to duplicates as read back).
 *
 * @since 0.1.0
 */
export const once = <A, E, R>(
  connection: Connection,
  schema: SchemaName.SchemaName,
  key: Key,
  write: Effect.Effect<A, E, R>
): Effect.Effect<Outcome<A>, E | IdempotencyKeyReused | DbError, R> =>
  Effect.gen(function*() {
    const claimed = yield* connection.query(Statements.claimKey(schema), [
      key.workspace,
      key.key,
      key.fingerprint,
      key.retentionSeconds
    ])
    if (claimed.length > 0) {
      const response = yield* write
      yield* connection.query(Statements.recordResponse(schema), [key.workspace, key.key, JSON.stringify(response)])
      return { replayed: false, response }
    }
    const [recorded] = yield* connection.query<{ fingerprint: string; response: string | null }>(
      Statements.selectKey(schema),
      [key.workspace, key.key]
    )
    // The row is visible only once its first request committed, with its response; a row without one (or
    // none at all) is not this request's record either.
    if (recorded === undefined || recorded.response === null || recorded.fingerprint !== key.fingerprint) {
      return yield* new IdempotencyKeyReused({ key: key.key })
    }
    return { replayed: true, response: JSON.parse(recorded.response) as A }
  })

/**
 * Deletes up to `limit` keys older than the retention window; returns how many it deleted. One statement:
 * small batches keep each one short, so pruning never holds locks a write would wait on for long.
 *
 * @since 0.1.0
 */
export const prune = (
  schema: SchemaName.SchemaName,
  retentionSeconds: number,
  limit: number
): Effect.Effect<number, DbError, DbSession> =>
  DbSession.use((db) => db.query(Statements.pruneKeys(schema), [retentionSeconds, limit])).pipe(
    Effect.map((rows) => rows.length)
  )

/**
 * The pruning loop of one schema, for the process's lifetime: after a random startup delay, every jittered
 * period (half the retention window, at most an hour, ±50 %, so a fleet does not prune in step) delete expired
 * keys in batches of `batchSize` until a batch comes back short, at most 20 batches a round. A failure (the
 * database unavailable) is logged at DEBUG and waits for the next round.
 *
 * @since 0.1.0
 */
export const pruneLoop = (
  schema: SchemaName.SchemaName,
  retentionSeconds: number,
  batchSize = 500
): Effect.Effect<never, never, DbSession> => {
  const period = Duration.millis(Math.min(retentionSeconds * 500, 3_600_000))
  const round = Effect.gen(function*() {
    let total = 0
    for (let batch = 0; batch < 20; batch++) {
      const deleted = yield* prune(schema, retentionSeconds, batchSize)
      total += deleted
      if (deleted < batchSize) break
    }
    if (total > 0) {
      yield* Effect.logDebug("pruned expired idempotency keys").pipe(Effect.annotateLogs({ schema, total }))
    }
  }).pipe(
    Effect.catch((error) =>
      Effect.logDebug("could not prune idempotency keys; next round").pipe(
        Effect.annotateLogs({ schema, error: error._tag })
      )
    )
  )
  return Effect.andThen(
    Effect.flatMap(Jitter.startupDelay(period), Effect.sleep),
    Effect.forever(Effect.andThen(round, Effect.flatMap(Jitter.jitter(period, 0.5), Effect.sleep)))
  )
}
