/**
 * The figures of a run: the ones the issue asks for (peak and mean active backends, peak client connections,
 * claim starts per second, claims completed, recovery time) and a few that explain them.
 *
 * @since 0.1.0
 */
import * as Model from "./Model.ts"
import type * as Recorder from "./Recorder.ts"
import type * as Simulation from "./Simulation.ts"

/**
 * The summary of one run.
 *
 * @since 0.1.0
 */
export interface Summary extends
  Pick<
    Recorder.Totals,
    | "polls"
    | "connectionAttempts"
    | "rejections"
    | "timeouts"
    | "failedPolls"
    | "claimsCancelled"
    | "apiRequests"
    | "apiServed"
    | "apiFailed"
    | "apiShed"
    | "events"
  >,
  Required<
    Pick<
      Recorder.Totals,
      | "writes"
      | "wakes"
      | "wakePolls"
      | "wakesCoalesced"
      | "wakesHeld"
      | "wakesIgnored"
      | "wakePollsFailed"
      | "resendsServed"
      | "resendsProcessed"
    >
  >
{
  readonly peakActiveBackends: number
  readonly meanActiveBackends: number
  readonly peakClientConnections: number
  readonly meanClientConnections: number
  readonly maxClaimStartsPerSecond: number
  readonly meanClaimStartsPerSecond: number
  readonly claimsCompleted: number
  /**
   * Seconds from the trigger's end until client connections and active backends are back under the backend
   * ceiling for good (0: they never went over after it); `null` if still over at the horizon.
   */
  readonly recoverySeconds: number | null
  /** Seconds (after the trigger's end) in which active backends reached the ceiling. */
  readonly secondsAtCeiling: number
  /** The window after the restart's transient (see {@link settledFrom}) and its claim-start statistics. */
  readonly settledFromSecond: number
  readonly settledMeanClaimStartsPerSecond: number
  readonly settledMaxClaimStartsPerSecond: number
  /** `settledMean + 5·sqrt(settledMean)`: the bound a desynchronized fleet stays under. */
  readonly settledHerdBound: number
  /**
   * The highest active backends from the trigger's end on (for a restart: the whole run).
   *
   * @since 0.3.0
   */
  readonly peakActiveAfterTrigger: number
  /**
   * The `outage` scenario: seconds from the database's return until every tenant's API had served its resent
   * write (its first 201), and until every one of those writes was processed by its deriver (time to drain);
   * `null` without an outage, or when some were not by the horizon.
   *
   * @since 0.3.0
   */
  readonly lastFirst201Seconds: number | null
  readonly drainSeconds: number | null
  /**
   * With writes: seconds from a write being served to its work's claim ending (the pickup): median, 99th
   * percentile and the longest (`null`: no writes).
   *
   * @since 0.3.0
   */
  readonly pickupP50Seconds: number | null
  readonly pickupP99Seconds: number | null
  readonly pickupMaxSeconds: number | null
  readonly wallSeconds: number
}

/**
 * The second from which a restarted fleet is in its steady cycle: the startup window, then the schedule's
 * climb to the cap at the jitter's longest (1 + ratio) stretch, then one more max interval. For a spread
 * start, the trigger's end.
 *
 * @since 0.1.0
 */
export const settledFrom = (params: Model.Params): number => {
  const poll = params.poll
  let climb = 0
  if (poll.enabled && poll.multiplier > 1) {
    for (let interval = poll.baseMillis; interval < poll.maxMillis; interval *= poll.multiplier) climb += interval
  }
  const restart = params.start === "aligned"
    ? params.startupJitterMillis + (1 + poll.ratio) * climb + poll.maxMillis
    : 0
  return Math.min(params.horizonSeconds, Math.ceil(Math.max(restart / 1000, Model.triggerEndSeconds(params))))
}

/**
 * Whether second `s` is over the ceiling: active backends at the ceiling, or more clients than backends.
 *
 * @since 0.1.0
 */
export const overCeiling = (series: Simulation.Series, ceiling: number, s: number): boolean =>
  series.activeBackends[s]! >= ceiling || series.clientConnections[s]! > ceiling

const pickupQuantiles = (pickups: ReadonlyArray<number>) => {
  if (pickups.length === 0) return { pickupP50Seconds: null, pickupP99Seconds: null, pickupMaxSeconds: null }
  const sorted = Float64Array.from(pickups).sort()
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]! / 1000
  return { pickupP50Seconds: at(0.5), pickupP99Seconds: at(0.99), pickupMaxSeconds: sorted[sorted.length - 1]! / 1000 }
}

/**
 * Summarizes a run.
 *
 * @since 0.1.0
 */
export const summarize = (outcome: Simulation.Outcome): Summary => {
  const { params, series, totals } = outcome
  const seconds = params.horizonSeconds
  const ceiling = params.pooler.backendCeiling
  const triggerEnd = Math.min(seconds, Math.ceil(Model.triggerEndSeconds(params)))
  let peakActive = 0
  let peakClients = 0
  let sumActive = 0
  let sumClients = 0
  let maxStarts = 0
  let sumStarts = 0
  let lastOver = -1
  let atCeiling = 0
  let peakAfter = 0
  for (let s = 0; s < seconds; s++) {
    peakActive = Math.max(peakActive, series.activeBackends[s]!)
    peakClients = Math.max(peakClients, series.clientConnections[s]!)
    sumActive += series.meanActiveBackends[s]!
    sumClients += series.meanClientConnections[s]!
    maxStarts = Math.max(maxStarts, series.claimStarts[s]!)
    sumStarts += series.claimStarts[s]!
    if (s >= triggerEnd && overCeiling(series, ceiling, s)) lastOver = s
    if (s >= triggerEnd && series.activeBackends[s]! >= ceiling) atCeiling++
    if (s >= triggerEnd) peakAfter = Math.max(peakAfter, series.activeBackends[s]!)
  }
  const recoverySeconds = lastOver < 0 ? 0 : lastOver === seconds - 1 ? null : lastOver + 1 - triggerEnd
  const settled = settledFrom(params)
  let settledSum = 0
  let settledMax = 0
  for (let s = settled; s < seconds; s++) {
    settledSum += series.claimStarts[s]!
    settledMax = Math.max(settledMax, series.claimStarts[s]!)
  }
  const settledMean = seconds > settled ? settledSum / (seconds - settled) : 0
  const sinceReturn = (millis: number, done: number) =>
    params.outage === undefined || done < params.derivers || millis < 0
      ? null
      : millis / 1000 - Model.triggerEndSeconds(params)
  return {
    peakActiveBackends: peakActive,
    meanActiveBackends: seconds > 0 ? sumActive / seconds : 0,
    peakClientConnections: peakClients,
    meanClientConnections: seconds > 0 ? sumClients / seconds : 0,
    maxClaimStartsPerSecond: maxStarts,
    meanClaimStartsPerSecond: seconds > 0 ? sumStarts / seconds : 0,
    claimsCompleted: totals.claimsCompleted,
    recoverySeconds,
    secondsAtCeiling: atCeiling,
    settledFromSecond: settled,
    settledMeanClaimStartsPerSecond: settledMean,
    settledMaxClaimStartsPerSecond: settledMax,
    settledHerdBound: settledMean + 5 * Math.sqrt(settledMean),
    peakActiveAfterTrigger: peakAfter,
    lastFirst201Seconds: sinceReturn(totals.lastResendServedMillis ?? -1, totals.resendsServed ?? 0),
    drainSeconds: sinceReturn(totals.lastResendProcessedMillis ?? -1, totals.resendsProcessed ?? 0),
    ...pickupQuantiles(outcome.pickups ?? []),
    writes: totals.writes ?? 0,
    wakes: totals.wakes ?? 0,
    wakePolls: totals.wakePolls ?? 0,
    wakesCoalesced: totals.wakesCoalesced ?? 0,
    wakesHeld: totals.wakesHeld ?? 0,
    wakesIgnored: totals.wakesIgnored ?? 0,
    wakePollsFailed: totals.wakePollsFailed ?? 0,
    resendsServed: totals.resendsServed ?? 0,
    resendsProcessed: totals.resendsProcessed ?? 0,
    polls: totals.polls,
    connectionAttempts: totals.connectionAttempts,
    rejections: totals.rejections,
    timeouts: totals.timeouts,
    failedPolls: totals.failedPolls,
    claimsCancelled: totals.claimsCancelled,
    apiRequests: totals.apiRequests,
    apiServed: totals.apiServed,
    apiFailed: totals.apiFailed,
    apiShed: totals.apiShed,
    events: totals.events,
    wallSeconds: outcome.wallMillis / 1000
  }
}
