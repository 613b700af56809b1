/**
 * What a simulation run records: per-second series (peaks, time-weighted means, event counts) and the run's
 * totals. The simulation tells it the time before each event and the fleet's state after it.
 *
 * @since 0.1.0
 */

/**
 * Per-second series, index = simulated second. Peaks are the maximum within the second; means are
 * time-weighted over the second; counts are events that happened in it.
 *
 * @since 0.1.0
 */
export interface Series {
  readonly activeBackends: Float64Array
  readonly meanActiveBackends: Float64Array
  readonly clientConnections: Float64Array
  readonly meanClientConnections: Float64Array
  readonly claimStarts: Float64Array
  readonly claimsCompleted: Float64Array
  readonly connectionAttempts: Float64Array
  readonly rejections: Float64Array
  readonly timeouts: Float64Array
  readonly failedPolls: Float64Array
}

/**
 * @since 0.1.0
 */
export const seriesNames: ReadonlyArray<keyof Series> = [
  "activeBackends",
  "meanActiveBackends",
  "clientConnections",
  "meanClientConnections",
  "claimStarts",
  "claimsCompleted",
  "connectionAttempts",
  "rejections",
  "timeouts",
  "failedPolls"
]

/**
 * Totals of a run.
 *
 * @since 0.1.0
 */
export interface Totals {
  readonly polls: number
  readonly claimStarts: number
  readonly claimsCompleted: number
  readonly connectionAttempts: number
  readonly rejections: number
  readonly timeouts: number
  readonly failedPolls: number
  /** Claims cancelled by their statement timeout. */
  readonly claimsCancelled: number
  /**
   * Open-loop API requests: arrived, served, failed (timeout, rejection or retry budget), shed by the admission
   * gate (no connection attempt), dropped (no slot).
   */
  readonly apiRequests: number
  readonly apiServed: number
  readonly apiFailed: number
  readonly apiShed: number
  readonly apiDropped: number
  /**
   * The wake path (`Model.Wake`): writes served (each gives its tenant a unit of work), wakes that reached a
   * deriver, the polls they caused (now, or the one more poll after a poll in flight), the wakes coalesced
   * (one was already waiting, or a poll due at once covered it), those held (the sleep was an overload
   * floor's or the startup delay, which a wake does not end: the poll after it covered the wake) and those
   * ignored (wakes were disarmed: they arrived after a woken poll failed and before a poll succeeded, or were
   * waiting when it failed). Every wake is one of the last four, or still waiting at the horizon (at most
   * one per deriver). `wakePollsFailed`: woken polls that failed (each restored its deriver's schedule and
   * disarmed its wakes). Optional, so that totals counted elsewhere (the outage lab's) need not name them; a
   * run's are all set.
   *
   * @since 0.3.0
   */
  readonly writes?: number
  readonly wakes?: number
  readonly wakePolls?: number
  readonly wakesCoalesced?: number
  readonly wakesHeld?: number
  readonly wakesIgnored?: number
  readonly wakePollsFailed?: number
  /**
   * The `outage` scenario's resent writes: served (each tenant's API's first 201 after the restart), processed
   * (claimed by the tenant's deriver), and the time of the last of each (milliseconds, -1: none).
   *
   * @since 0.3.0
   */
  readonly resendsServed?: number
  readonly resendsProcessed?: number
  readonly lastResendServedMillis?: number
  readonly lastResendProcessedMillis?: number
  readonly events: number
}

/**
 * The events counted both in the totals and per second.
 *
 * @since 0.1.0
 */
export type Counted =
  | "claimStarts"
  | "claimsCompleted"
  | "connectionAttempts"
  | "rejections"
  | "timeouts"
  | "failedPolls"

type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/**
 * The recorder of one run over `seconds` simulated seconds.
 *
 * @since 0.1.0
 */
export class Recorder {
  readonly series: Series
  readonly totals: Mutable<Required<Totals>> = {
    polls: 0,
    claimStarts: 0,
    claimsCompleted: 0,
    connectionAttempts: 0,
    rejections: 0,
    timeouts: 0,
    failedPolls: 0,
    claimsCancelled: 0,
    apiRequests: 0,
    apiServed: 0,
    apiFailed: 0,
    apiShed: 0,
    apiDropped: 0,
    writes: 0,
    wakes: 0,
    wakePolls: 0,
    wakesCoalesced: 0,
    wakesHeld: 0,
    wakesIgnored: 0,
    wakePollsFailed: 0,
    resendsServed: 0,
    resendsProcessed: 0,
    lastResendServedMillis: -1,
    lastResendProcessedMillis: -1,
    events: 0
  }
  private readonly seconds: number
  private second = 0
  private boundary = 1000
  private lastTime = 0
  private areaActive = 0
  private areaClients = 0
  private peakActive = 0
  private peakClients = 0

  constructor(seconds: number) {
    this.seconds = seconds
    this.series = {
      activeBackends: new Float64Array(seconds),
      meanActiveBackends: new Float64Array(seconds),
      clientConnections: new Float64Array(seconds),
      meanClientConnections: new Float64Array(seconds),
      claimStarts: new Float64Array(seconds),
      claimsCompleted: new Float64Array(seconds),
      connectionAttempts: new Float64Array(seconds),
      rejections: new Float64Array(seconds),
      timeouts: new Float64Array(seconds),
      failedPolls: new Float64Array(seconds)
    }
  }

  /**
   * Time moves to `t` with `active` backends and `clients` connections unchanged since the last call: closes
   * every whole second up to `t`, then accumulates the time-weighted areas.
   */
  tick(t: number, active: number, clients: number): void {
    const seconds = this.seconds
    const series = this.series
    while (t >= this.boundary && this.second < seconds) {
      this.areaActive += active * (this.boundary - this.lastTime)
      this.areaClients += clients * (this.boundary - this.lastTime)
      series.meanActiveBackends[this.second] = this.areaActive / 1000
      series.meanClientConnections[this.second] = this.areaClients / 1000
      series.activeBackends[this.second] = this.peakActive
      series.clientConnections[this.second] = this.peakClients
      this.areaActive = 0
      this.areaClients = 0
      this.peakActive = active
      this.peakClients = clients
      this.lastTime = this.boundary
      this.boundary += 1000
      this.second++
    }
    if (this.second < seconds) {
      this.areaActive += active * (t - this.lastTime)
      this.areaClients += clients * (t - this.lastTime)
      this.lastTime = t
    }
  }

  /** The state after an event: keeps the second's peaks. */
  observe(active: number, clients: number): void {
    if (active > this.peakActive) this.peakActive = active
    if (clients > this.peakClients) this.peakClients = clients
  }

  /** One more `name` event, in the totals and in the current second. */
  count(name: Counted): void {
    this.totals[name]++
    if (this.second < this.seconds) this.series[name][this.second]!++
  }
}
