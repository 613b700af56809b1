/**
 * Reconciles a {@link History} with what the database holds, after the run (once writers and derivers are
 * quiet): every acknowledged message stored exactly once, nothing refused stored, every stored message folded
 * into its peer's representation exactly once (message counts and term counts equal), each (session, peer)
 * numbered 1…n without a gap, every queue item processed, none errored, none completed by a worker that no
 * longer owned its unit. The result is a typed {@link Verdict}; {@link table} prints it by kind, as Jepsen's
 * checkers do.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { Connection, DbError } from "@resilience/db-session"
import { QueueStatus, Terms } from "@resilience/domain"
import { SchemaName } from "@resilience/schema"
import { Data, Effect, Schedule } from "effect"
import type { Duration } from "effect"
import type * as History from "./History.ts"

/**
 * The kinds of anomaly, in the order the table lists them.
 *
 * @since 0.1.0
 */
export const kinds = [
  "lost",
  "duplicated",
  "refused-stored",
  "unrecorded",
  "unfolded",
  "folded-twice",
  "terms-mismatch",
  "sequence-gap",
  "unprocessed",
  "dead-letter",
  "errored",
  "non-owner-completion"
] as const

/**
 * An anomaly kind:
 *
 * - `lost`: an acknowledged write is not stored (amount: messages missing);
 * - `duplicated`: a write is stored more times than it was acknowledged or left unknown (amount: extra copies);
 * - `refused-stored`: a write its client saw refused is stored;
 * - `unrecorded`: a stored message of a session in the history that no operation wrote;
 * - `unfolded` / `folded-twice`: a peer's representation counts fewer / more messages than are stored for it;
 * - `terms-mismatch`: a term whose count in the representation differs from the stored messages' (amount: terms);
 * - `sequence-gap`: a (session, peer) whose messages are not numbered 1…n, or whose counter is not at n;
 * - `unprocessed`, `errored`: queue items of the history's workspaces left unprocessed, or marked with an error;
 * - `dead-letter`: queue items whose handler failed its last attempt (since 0.3.0): kept for a replay, so neither
 *   lost (not `unprocessed`) nor processed;
 * - `non-owner-completion`: an item completed outside a claim, or by a claim older than one that had already
 *   completed an item of the same unit (a worker that had lost its unit), or a claim id with two owners.
 *
 * @since 0.1.0
 */
export type Kind = typeof kinds[number]

/**
 * One anomaly: its kind, how many messages, items or terms it covers, what it concerns and a detail.
 *
 * @since 0.1.0
 */
export interface Anomaly {
  readonly kind: Kind
  readonly amount: number
  readonly subject: string
  readonly detail: string
}

/**
 * The run's totals: operations by outcome, messages stored (in the history's sessions), messages stored and
 * counted for the history's peers, queue items of the history's workspaces.
 *
 * @since 0.1.0
 */
export interface Totals {
  readonly operations: number
  readonly acknowledged: number
  readonly refused: number
  readonly unknown: number
  readonly stored: number
  readonly peerMessages: number
  readonly counted: number
  readonly items: number
  readonly processed: number
}

/**
 * The verdict: valid when no anomaly was found; `counts` sums the amounts by kind.
 *
 * @since 0.1.0
 */
export interface Verdict {
  readonly valid: boolean
  readonly totals: Totals
  readonly counts: Readonly<Record<Kind, number>>
  readonly anomalies: ReadonlyArray<Anomaly>
}

/**
 * A verdict with anomalies, as a failure (see {@link check}); `table` is the printed verdict.
 *
 * @since 0.1.0
 */
export class Inconsistent extends Data.TaggedError("Inconsistent")<{
  readonly verdict: Verdict
  readonly table: string
}> {
  override get message() {
    return this.table
  }
}

/**
 * Options of {@link reconcile}. What it reconciles is the history's own scope: its workspaces (queue items),
 * sessions (stored messages) and peers (representations).
 *
 * @since 0.1.0
 */
export interface Options {
  /** Examples kept per kind (default 5); amounts always cover every anomaly. */
  readonly examples?: number | undefined
}

const key = (...parts: ReadonlyArray<string>) => JSON.stringify(parts)

const oneLine = (text: string) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > 160 ? `${flat.slice(0, 157)}...` : flat
}

const distinct = <A>(values: ReadonlyArray<A>, by: (a: A) => string): ReadonlyArray<A> => [
  ...new Map(values.map((value) => [by(value), value])).values()
]

/**
 * Reconciles `history` with the tables of `schema` (see the module comment), in one read-only transaction.
 *
 * @since 0.1.0
 */
export const reconcile = (
  schema: SchemaName.SchemaName,
  history: History.History,
  options: Options = {}
): Effect.Effect<Verdict, DbError, DbSession> =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const operations = history.operations
    const sessions = distinct(operations, (o) => key(o.workspace, o.session))
      .map(({ session, workspace }) => ({ workspace, session }))
    const peers = distinct(operations, (o) => key(o.workspace, o.peer)).map(({ peer, workspace }) => ({
      workspace,
      peer
    }))
    const workspaces = [...new Set(operations.map((o) => o.workspace))]
    const anomalies: Array<Anomaly> = []
    const found = (kind: Kind, amount: number, subject: string, detail: string) => {
      if (amount > 0) anomalies.push({ kind, amount, subject: oneLine(subject), detail: oneLine(detail) })
    }
    const read = yield* db.transaction((connection) => readState(connection, schema, { sessions, peers, workspaces }))

    // Writes: every operation's key against the messages stored under it.
    const byKey = new Map<string, { ack: number; maybe: number; refused: number; op: History.Operation }>()
    for (const op of operations) {
      const k = key(op.workspace, op.session, op.peer, op.content)
      const entry = byKey.get(k) ?? { ack: 0, maybe: 0, refused: 0, op }
      if (op.outcome === "acknowledged") entry.ack++
      else if (op.outcome === "refused") entry.refused++
      else entry.maybe++
      byKey.set(k, entry)
    }
    const stored = new Map(read.stored.map((row) => [key(row.workspace, row.session, row.peer, row.content), row.n]))
    for (const [k, { ack, maybe, op, refused }] of byKey) {
      const n = stored.get(k) ?? 0
      const subject = `${op.client} → ${op.workspace}/${op.session}/${op.peer}: ${op.content}`
      found("lost", ack - n, subject, `acknowledged ${ack}, stored ${n}`)
      const extra = n - ack - maybe
      if (extra > 0) {
        found(
          refused > 0 && extra <= refused ? "refused-stored" : "duplicated",
          extra,
          subject,
          `acknowledged ${ack}, unknown ${maybe}, refused ${refused}, stored ${n}`
        )
      }
    }
    for (const row of read.stored) {
      if (!byKey.has(key(row.workspace, row.session, row.peer, row.content))) {
        found(
          "unrecorded",
          row.n,
          `${row.workspace}/${row.session}/${row.peer}: ${row.content}`,
          "no operation wrote it"
        )
      }
    }

    // Derivation: each peer's representation against its stored messages.
    for (const peer of read.peers) {
      const subject = `${peer.workspace}/${peer.peer}`
      const detail = `stored ${peer.stored}, counted ${peer.counted}`
      found("unfolded", peer.stored - peer.counted, subject, detail)
      found("folded-twice", peer.counted - peer.stored, subject, detail)
      const expected = Terms.count(read.contents.get(key(peer.workspace, peer.peer)) ?? [])
      const actual = read.terms.get(key(peer.workspace, peer.peer)) ?? new Map<string, number>()
      const differing = [...new Set([...expected.keys(), ...actual.keys()])]
        .filter((term) => (expected.get(term) ?? 0) !== (actual.get(term) ?? 0))
      found(
        "terms-mismatch",
        differing.length,
        subject,
        differing.slice(0, 3).map((t) => `${t}: stored ${expected.get(t) ?? 0}, counted ${actual.get(t) ?? 0}`)
          .join("; ")
      )
    }
    for (const s of read.sequences) {
      const gap = Math.max(s.top - s.n, s.n - s.distinct, Math.abs(s.counter - s.top))
      found(
        "sequence-gap",
        gap,
        `${s.workspace}/${s.session}/${s.peer}`,
        `${s.n} messages numbered up to ${s.top} (${s.distinct} distinct), counter at ${s.counter}`
      )
    }

    // The queue.
    found("unprocessed", read.queue.unprocessed, "queue", `not processed: ${read.queue.unprocessed}`)
    found("dead-letter", read.queue.dead, "queue", `dead letters (replay them): ${read.queue.dead}`)
    found("errored", read.queue.errored, "queue", read.queue.firstError)
    for (const item of read.nonOwner) found("non-owner-completion", 1, `item ${item.id} (${item.unit})`, item.detail)

    const counts = Object.fromEntries(kinds.map((kind) => [kind, 0])) as Record<Kind, number>
    for (const anomaly of anomalies) counts[anomaly.kind] += anomaly.amount
    const perKind = options.examples ?? 5
    const outcomes = (outcome: History.Operation["outcome"]) => operations.filter((o) => o.outcome === outcome).length
    return {
      valid: anomalies.length === 0,
      counts,
      anomalies: kinds.flatMap((kind) => anomalies.filter((a) => a.kind === kind).slice(0, perKind)),
      totals: {
        operations: operations.length,
        acknowledged: outcomes("acknowledged"),
        refused: outcomes("refused"),
        unknown: outcomes("unknown") + outcomes("pending"),
        stored: read.stored.reduce((sum, row) => sum + row.n, 0),
        peerMessages: read.peers.reduce((sum, peer) => sum + peer.stored, 0),
        counted: read.peers.reduce((sum, peer) => sum + peer.counted, 0),
        items: read.queue.items,
        processed: read.queue.processed
      }
    } satisfies Verdict
  }).pipe(Effect.withSpan("Checker.reconcile", { attributes: { schema } }))

interface Scope {
  readonly sessions: ReadonlyArray<{ readonly workspace: string; readonly session: string }>
  readonly peers: ReadonlyArray<{ readonly workspace: string; readonly peer: string }>
  readonly workspaces: ReadonlyArray<string>
}

/** Everything the checks read, in one snapshot. */
const readState = (connection: Connection, schema: SchemaName.SchemaName, scope: Scope) =>
  Effect.gen(function*() {
    const t = (name: string) => SchemaName.qualify(schema, name)
    yield* connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    const sessions = JSON.stringify(scope.sessions)
    const peers = JSON.stringify(scope.peers)
    const inSessions = `(m.workspace, m.session) IN (
      SELECT s.workspace, s.session FROM jsonb_to_recordset($1::jsonb) AS s(workspace text, session text))`
    const stored = yield* connection.query<
      { workspace: string; session: string; peer: string; content: string; n: number }
    >(
      `SELECT m.workspace, m.session, m.peer, m.content, count(*)::int AS n FROM ${t("messages")} m
       WHERE ${inSessions} GROUP BY 1, 2, 3, 4`,
      [sessions]
    )
    const sequences = yield* connection.query<
      { workspace: string; session: string; peer: string; n: number; top: number; distinct: number; counter: number }
    >(
      `SELECT m.workspace, m.session, m.peer, count(*)::int AS n, max(m.seq)::int AS top,
         count(DISTINCT m.seq)::int AS distinct, coalesce(max(c.last_seq), 0)::int AS counter
       FROM ${t("messages")} m LEFT JOIN ${t("message_seq")} c USING (workspace, session, peer)
       WHERE ${inSessions} GROUP BY 1, 2, 3`,
      [sessions]
    )
    const peerRows = yield* connection.query<{ workspace: string; peer: string; stored: number; counted: number }>(
      `SELECT p.workspace, p.peer,
         (SELECT count(*) FROM ${t("messages")} m WHERE m.workspace = p.workspace AND m.peer = p.peer)::int AS stored,
         coalesce((SELECT r.message_count FROM ${t("peer_representations")} r
                   WHERE r.workspace = p.workspace AND r.peer = p.peer), 0)::int AS counted
       FROM jsonb_to_recordset($1::jsonb) AS p(workspace text, peer text)`,
      [peers]
    )
    const contentRows = yield* connection.query<{ workspace: string; peer: string; content: string }>(
      `SELECT m.workspace, m.peer, m.content FROM ${t("messages")} m
       WHERE (m.workspace, m.peer) IN (
         SELECT p.workspace, p.peer FROM jsonb_to_recordset($1::jsonb) AS p(workspace text, peer text))`,
      [peers]
    )
    const termRows = yield* connection.query<{ workspace: string; peer: string; term: string; count: number }>(
      `SELECT pt.workspace, pt.peer, pt.term, pt.count::int AS count FROM ${t("peer_terms")} pt
       WHERE (pt.workspace, pt.peer) IN (
         SELECT p.workspace, p.peer FROM jsonb_to_recordset($1::jsonb) AS p(workspace text, peer text))`,
      [peers]
    )
    const [queue] = yield* connection.query<
      {
        items: number
        processed: number
        unprocessed: number
        dead: number
        errored: number
        first_error: string | null
      }
    >(
      `SELECT count(*)::int AS items, count(*) FILTER (WHERE processed)::int AS processed,
         count(*) FILTER (WHERE NOT processed AND dead_at IS NULL)::int AS unprocessed,
         count(*) FILTER (WHERE NOT processed AND dead_at IS NOT NULL)::int AS dead,
         count(*) FILTER (WHERE processed AND error IS NOT NULL)::int AS errored,
         min(error) AS first_error
       FROM ${t("queue")} WHERE payload ->> 'workspace' = ANY($1::text[])`,
      [scope.workspaces]
    )
    // Claims of a unit follow one another (a unit has one ownership row at a time, ids only grow) and a
    // claim marks only while it holds, so in the order of the marks a unit's claim ids never go down.
    const nonOwner = yield* connection.query<{ id: string; unit: string; detail: string }>(
      `SELECT x.id::text AS id, x.work_unit_key AS unit,
         CASE WHEN x.processed_claim IS NULL THEN 'completed outside a claim'
              WHEN x.owners > 1 THEN 'claim ' || x.processed_claim || ' has ' || x.owners || ' owners'
              ELSE 'completed by claim ' || x.processed_claim || ' of ' || coalesce(x.processed_by, '?')
                   || ' after claim ' || x.prior || ' had completed an item' END AS detail
       FROM (
         SELECT q.id, q.work_unit_key, q.processed_claim, q.processed_by, coalesce(o.owners, 0) AS owners,
           max(q.processed_claim) OVER (PARTITION BY q.work_unit_key ORDER BY q.processed_at, q.id
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prior
         FROM ${t("queue")} q
         LEFT JOIN (SELECT processed_claim, count(DISTINCT processed_by) AS owners FROM ${t("queue")}
                    WHERE processed AND processed_claim IS NOT NULL GROUP BY 1) o USING (processed_claim)
         WHERE q.processed AND q.payload ->> 'workspace' = ANY($1::text[])
       ) x
       WHERE x.processed_claim IS NULL OR x.processed_claim < x.prior OR x.owners > 1
       ORDER BY x.id`,
      [scope.workspaces]
    )
    const contents = new Map<string, Array<string>>()
    for (const row of contentRows) {
      const k = key(row.workspace, row.peer)
      contents.set(k, [...(contents.get(k) ?? []), row.content])
    }
    const terms = new Map<string, Map<string, number>>()
    for (const row of termRows) {
      const k = key(row.workspace, row.peer)
      terms.set(k, (terms.get(k) ?? new Map<string, number>()).set(row.term, row.count))
    }
    return {
      stored,
      sequences,
      peers: peerRows,
      contents,
      terms,
      queue: {
        items: queue?.items ?? 0,
        processed: queue?.processed ?? 0,
        unprocessed: queue?.unprocessed ?? 0,
        dead: queue?.dead ?? 0,
        errored: queue?.errored ?? 0,
        firstError: queue?.first_error ?? ""
      },
      nonOwner
    }
  })

const pad = (text: string, width: number) => text.length >= width ? text : text + " ".repeat(width - text.length)

/**
 * The verdict as a table: one row per kind (its amount and first example), the totals, and `valid?`.
 *
 * @since 0.1.0
 */
export const table = (verdict: Verdict): string => {
  const width = Math.max(...kinds.map((k) => k.length))
  const rows = kinds.map((kind) => {
    const first = verdict.anomalies.find((a) => a.kind === kind)
    const example = first === undefined ? "" : `  e.g. ${first.subject} (${first.detail})`
    return `${pad(kind, width)}  ${String(verdict.counts[kind]).padStart(6)}${example}`
  })
  const t = verdict.totals
  return [
    `${pad("anomaly", width)}  ${"count".padStart(6)}`,
    ...rows,
    `operations ${t.operations}: acknowledged ${t.acknowledged}, refused ${t.refused}, unknown ${t.unknown}; ` +
    `stored ${t.stored}; peers' messages ${t.peerMessages}, counted ${t.counted}; ` +
    `queue items ${t.items}, processed ${t.processed}`,
    `valid? ${verdict.valid}`
  ].join("\n")
}

/**
 * {@link reconcile}, failing with {@link Inconsistent} (which carries the verdict and its table) unless valid.
 *
 * @since 0.1.0
 */
export const check = (
  schema: SchemaName.SchemaName,
  history: History.History,
  options?: Options
): Effect.Effect<Verdict, DbError | Inconsistent, DbSession> =>
  Effect.flatMap(
    reconcile(schema, history, options),
    (verdict) =>
      verdict.valid ? Effect.succeed(verdict) : Effect.fail(new Inconsistent({ verdict, table: table(verdict) }))
  )

/**
 * Waits (at most `timeout`, default 60 s) until no queue item of the history's workspaces is pending, in
 * progress or waiting for its time (a retry; dead letters do not count), polling about every 50 ms (jittered);
 * returns the backlog left (0: settled). Run it before
 * {@link reconcile} while a deriver is still running; whatever it leaves shows as `unprocessed`.
 *
 * @since 0.1.0
 */
export const settle = (
  schema: SchemaName.SchemaName,
  history: History.History,
  timeout: Duration.Input = "60 seconds"
): Effect.Effect<number, DbError, DbSession> => {
  const workspaces = [...new Set(history.operations.map((o) => o.workspace))]
  const backlog = Effect.map(
    Effect.forEach(workspaces, (workspace) => QueueStatus.forWorkspace(schema, workspace)),
    (statuses) => statuses.reduce((sum, s) => sum + s.pending + s.inProgress + (s.waiting ?? 0), 0)
  )
  const waited = Effect.repeat(backlog, {
    schedule: Schedule.spaced("50 millis").pipe(Schedule.jittered, Schedule.upTo({ duration: timeout })),
    while: (left) => left > 0
  })
  return Effect.andThen(waited, backlog)
}
