/**
 * The run's verdict: the clients' record reconciled with what the database holds once the queue is drained.
 * One call, `reconcile`, that the shared consistency checker replaces when it lands; until then this is the
 * minimum the issue asks: every acknowledged write stored exactly once, no write stored twice, nothing stored
 * that nobody sent, every peer's derived count equal to its stored messages, the queue drained, no item errored.
 */
import { Data, Effect } from "effect"
import pg from "pg"
import type * as History from "./History.ts"

/** Anomalies by kind; all zero is a clean run. */
export interface Anomalies {
  /** Acknowledged writes not stored: the writes a failover lost. */
  readonly lostAcknowledged: number
  /** Writes (any outcome) stored more than once. */
  readonly duplicated: number
  /** Stored messages that match no write sent. */
  readonly unexpected: number
  /** Peers whose representation counts differ from their stored messages. */
  readonly derivedMismatch: number
  /** Queue items not processed. */
  readonly queuePending: number
  /** Queue items processed with an error. */
  readonly queueErrored: number
}

/** The verdict: anomalies, and the counts they were reconciled from. */
export interface Verdict {
  readonly anomalies: Anomalies
  readonly stored: number
  /** Refused or unknown writes that turned out stored (allowed: the client could not know). */
  readonly storedUnacknowledged: number
}

/** The database could not be read for the verdict. */
export class VerdictFailed extends Data.TaggedError("VerdictFailed")<{ readonly detail: string }> {}

/** Whether a verdict has no anomaly. */
export const clean = (verdict: Verdict): boolean => Object.values(verdict.anomalies).every((count) => count === 0)

const query = <Row>(client: pg.Client, text: string, values: ReadonlyArray<unknown>) =>
  Effect.tryPromise({
    try: () => client.query(text, [...values]).then((result) => result.rows as Array<Row>),
    catch: (error) => new VerdictFailed({ detail: String(error) })
  })

/** Reconciles `history` with the tables of `schema` for `workspace`, reading through `url`. */
export const reconcile = (options: {
  readonly url: string
  readonly schema: string
  readonly workspace: string
  readonly history: History.History
}): Effect.Effect<Verdict, VerdictFailed> =>
  Effect.scoped(Effect.gen(function*() {
    const client = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const client = new pg.Client({ connectionString: options.url })
          await client.connect()
          return client
        },
        catch: (error) => new VerdictFailed({ detail: String(error) })
      }),
      (client) => Effect.promise(() => client.end())
    )
    const table = (name: string) => `"${options.schema}".${name}`
    const stored = yield* query<{ content: string; n: number }>(
      client,
      `SELECT content, count(*)::int AS n FROM ${table("messages")} WHERE workspace = $1 GROUP BY content`,
      [options.workspace]
    )
    const derived = yield* query<{ peer: string; stored: number; derived: number }>(
      client,
      `SELECT m.peer, m.n AS stored, coalesce(r.message_count, 0)::int AS derived
       FROM (SELECT peer, count(*)::int AS n FROM ${table("messages")} WHERE workspace = $1 GROUP BY peer) m
       LEFT JOIN ${table("peer_representations")} r ON r.workspace = $1 AND r.peer = m.peer`,
      [options.workspace]
    )
    const queue = yield* query<{ pending: number; errored: number }>(
      client,
      `SELECT count(*) FILTER (WHERE NOT processed)::int AS pending,
              count(*) FILTER (WHERE error IS NOT NULL)::int AS errored
       FROM ${table("queue")} WHERE payload ->> 'workspace' = $1`,
      [options.workspace]
    )
    const counts = new Map(stored.map((row) => [row.content, row.n]))
    const sent = new Set(options.history.writes.map((write) => write.content))
    const times = (write: History.Write) => counts.get(write.content) ?? 0
    const writes = options.history.writes
    return {
      stored: stored.reduce((sum, row) => sum + row.n, 0),
      storedUnacknowledged: writes.filter((write) => write.outcome !== "acknowledged" && times(write) > 0).length,
      anomalies: {
        lostAcknowledged: writes.filter((write) => write.outcome === "acknowledged" && times(write) === 0).length,
        duplicated: writes.filter((write) => times(write) > 1).length,
        unexpected: stored.filter((row) => !sent.has(row.content)).length,
        derivedMismatch: derived.filter((row) => row.stored !== row.derived).length,
        queuePending: queue[0]?.pending ?? 0,
        queueErrored: queue[0]?.errored ?? 0
      }
    } satisfies Verdict
  }))
