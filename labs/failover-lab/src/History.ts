/**
 * What the clients saw, recorded as it happened: every HTTP attempt of a write (when it was sent, when it was
 * answered, the status or a transport failure, whether a 503 carried `Retry-After`), and every logical write
 * in the consistency checker's history (`@resilience/checker`: its request and how it ended). The figures of a
 * scenario are pure functions of this record and the fault's time.
 */
import { History as Operations } from "@resilience/checker"

/** One HTTP attempt of a write; `status` is `"transport"` when no answer came (connection failed or reset). */
export interface Attempt {
  readonly sentAt: number
  readonly answeredAt: number
  readonly status: number | "transport"
  readonly retryAfter: boolean
}

/** A run's record, appended to while the traffic runs. */
export interface History {
  readonly attempts: Array<Attempt>
  /** The logical writes, for the checker: `acknowledged` (201), `refused` (a 4xx), `unknown` (anything else). */
  readonly operations: Operations.History
}

/** An empty record. */
export const make = (): History => ({ attempts: [], operations: Operations.make() })

/** The client-side figures of one fault. Times in milliseconds from the fault; `null`: did not happen. */
export interface Figures {
  /**
   * The longest stretch without a 201 answer, among the answers from one second before the fault on: its
   * length, and when it ended (the first 201 after it), from the fault. Healthy traffic at r writes/s has
   * gaps of about 1/r.
   */
  readonly longestGapMillis: number | null
  readonly gapEndMillis: number | null
  /** The first refused attempt (any answer but 201) answered at or after the fault. */
  readonly firstRefusalMillis: number | null
  /** The last refused attempt answered at or after the fault: the end of the window as clients saw it. */
  readonly lastRefusalMillis: number | null
  /**
   * Fault → the first 201 of an attempt sent after the first refusal was answered (a request that was in flight
   * on the old primary and answered late does not count); with no refusal at all, the first 201 after the fault.
   */
  readonly firstAcknowledgedMillis: number | null
  /** Latency of the 201 answers before the fault, median and 99th percentile (what a commit costs). */
  readonly latencyBeforeMillis: { readonly p50: number | null; readonly p99: number | null }
  /** Attempts answered 503 with `Retry-After` at or after the fault. */
  readonly unavailableWithRetryAfter: number
  /** Attempts answered 503 without `Retry-After` (must be 0). */
  readonly unavailableWithoutRetryAfter: number
  /** Attempts answered 500 anywhere in the run (must be 0). */
  readonly internalErrors: number
  /** Attempts with no HTTP answer at all (the API itself unreachable). */
  readonly transportFailures: number
  /** Other non-201 answers. */
  readonly otherStatuses: number
  /** Logical writes by outcome (the checker's): `unknown` counts those the client gave up on. */
  readonly writes: number
  readonly acknowledged: number
  readonly refused: number
  readonly unknown: number
}

const count = <A>(items: ReadonlyArray<A>, predicate: (item: A) => boolean) =>
  items.reduce((sum, item) => sum + (predicate(item) ? 1 : 0), 0)

/** The figures of the fault at `faultAt` (same clock as the record). */
export const figures = (history: History, faultAt: number): Figures => {
  const after = history.attempts.filter((attempt) => attempt.answeredAt >= faultAt)
  const refusals = after.filter((attempt) => attempt.status !== 201).sort((a, b) => a.answeredAt - b.answeredAt)
  const firstRefusal = refusals[0]
  const acknowledged = after
    .filter((attempt) =>
      attempt.status === 201 && (firstRefusal === undefined || attempt.sentAt >= firstRefusal.answeredAt)
    )
    .sort((a, b) => a.answeredAt - b.answeredAt)[0]
  const since = (at: number | undefined) => at === undefined ? null : at - faultAt
  const answers = history.attempts
    .filter((attempt) => attempt.status === 201 && attempt.answeredAt >= faultAt - 1_000)
    .map((attempt) => attempt.answeredAt)
    .sort((a, b) => a - b)
  let gap: { readonly length: number; readonly end: number } | undefined
  for (let i = 1; i < answers.length; i++) {
    const length = answers[i]! - answers[i - 1]!
    if (gap === undefined || length > gap.length) gap = { length, end: answers[i]! }
  }
  const latencies = history.attempts
    .filter((attempt) => attempt.status === 201 && attempt.answeredAt < faultAt)
    .map((attempt) => attempt.answeredAt - attempt.sentAt)
    .sort((a, b) => a - b)
  const quantile = (q: number) =>
    latencies.length === 0 ? null : latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!
  return {
    latencyBeforeMillis: { p50: quantile(0.5), p99: quantile(0.99) },
    longestGapMillis: gap?.length ?? null,
    gapEndMillis: since(gap?.end),
    firstRefusalMillis: since(firstRefusal?.answeredAt),
    lastRefusalMillis: since(refusals.at(-1)?.answeredAt),
    firstAcknowledgedMillis: since(acknowledged?.answeredAt),
    unavailableWithRetryAfter: count(after, (attempt) => attempt.status === 503 && attempt.retryAfter),
    unavailableWithoutRetryAfter: count(history.attempts, (attempt) => attempt.status === 503 && !attempt.retryAfter),
    internalErrors: count(history.attempts, (attempt) => attempt.status === 500),
    transportFailures: count(history.attempts, (attempt) => attempt.status === "transport"),
    otherStatuses: count(
      history.attempts,
      (attempt) => typeof attempt.status === "number" && ![201, 500, 503].includes(attempt.status)
    ),
    writes: history.operations.operations.length,
    acknowledged: count(history.operations.operations, (write) => write.outcome === "acknowledged"),
    refused: count(history.operations.operations, (write) => write.outcome === "refused"),
    unknown: count(
      history.operations.operations,
      (write) => write.outcome !== "acknowledged" && write.outcome !== "refused"
    )
  }
}

/** Answers per second from the fault: 201s, 503s and anything else, for seconds `from` (negative: before) on. */
export const timeline = (history: History, faultAt: number, from: number) => {
  const seconds = new Map<number, { acknowledged: number; unavailable: number; other: number }>()
  for (const attempt of history.attempts) {
    const second = Math.floor((attempt.answeredAt - faultAt) / 1000)
    if (second < from) continue
    const row = seconds.get(second) ?? { acknowledged: 0, unavailable: 0, other: 0 }
    if (attempt.status === 201) row.acknowledged += 1
    else if (attempt.status === 503) row.unavailable += 1
    else row.other += 1
    seconds.set(second, row)
  }
  return [...seconds.entries()].sort(([a], [b]) => a - b).map(([second, row]) => ({ second, ...row }))
}
