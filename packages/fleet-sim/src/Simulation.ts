/**
 * The discrete-event simulation: N derivers, one pooler, one database, one seeded generator. Every
 * scheduling decision a deriver takes (startup delay, each sleep, backoff growth, reset) comes from
 * `@resilience/deriver`'s `Scheduling` module, the code the real loop runs; only the removed connection
 * retry ({@link RetryBackoff}) is written here.
 *
 * The hot loop is plain TypeScript over typed arrays: an event heap, FIFO ring buffers, a processor-sharing
 * database, no allocation per event beyond the deriver's own decision objects.
 *
 * @since 0.1.0
 */
import { Scheduling } from "@resilience/deriver"
import { EventQueue } from "./EventQueue.ts"
import { IntQueue } from "./IntQueue.ts"
import type * as Model from "./Model.ts"
import * as Prng from "./Prng.ts"
import { ProcessorSharing } from "./ProcessorSharing.ts"
import * as RetryBackoff from "./RetryBackoff.ts"

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
  /** Open-loop API requests: arrived, served, failed (timeout, rejection or retry budget), dropped (no slot). */
  readonly apiRequests: number
  readonly apiServed: number
  readonly apiFailed: number
  readonly apiDropped: number
  readonly events: number
}

/**
 * The raw outcome of a run: series, totals, and the first claim start times (for small checks by hand).
 *
 * @since 0.1.0
 */
export interface Outcome {
  readonly params: Model.Params
  readonly series: Series
  readonly totals: Totals
  /** Claim start times in milliseconds, in order, for the first `recordClaims` claims. */
  readonly claimStartTimes: ReadonlyArray<{ readonly deriver: number; readonly atMillis: number }>
  readonly wallMillis: number
}

/**
 * Progress of a running simulation.
 *
 * @since 0.1.0
 */
export interface Progress {
  readonly simulatedSeconds: number
  readonly horizonSeconds: number
  readonly events: number
  readonly activeBackends: number
  readonly clientConnections: number
}

/**
 * Options of {@link run}.
 *
 * @since 0.1.0
 */
export interface RunOptions {
  /** Called about twice a second of wall time. */
  readonly onProgress?: ((progress: Progress) => void) | undefined
  /** How many claim starts to record individually (default 0). */
  readonly recordClaims?: number | undefined
  /** Wall clock in milliseconds, for progress pacing (default `performance.now`). */
  readonly now?: (() => number) | undefined
}

// Event kinds.
const WAKE = 0
const POOLER_DONE = 1
const CONNECT_TIMEOUT = 2
const RETRY_WAKE = 3
const QUEUE_TIMEOUT = 4
const SPIKE_START = 5
const SPIKE_END = 6
const API_ARRIVAL = 7

// Deriver phases.
const IDLE = 0
const ATTEMPT = 1
const WAITING = 2
const CLAIM = 3
const RETRY_SLEEP = 4

// Pooler job kinds.
const JOB_ATTEMPT = 0
const JOB_RELAY = 1

/**
 * Runs one simulation to its horizon. Deterministic: the same parameters (seed included) give the same
 * outcome.
 *
 * @since 0.1.0
 */
export const run = (params: Model.Params, options: RunOptions = {}): Outcome => {
  const clock = options.now ?? (() => performance.now())
  const wallStart = clock()
  const n = params.derivers
  const horizonMillis = params.horizonSeconds * 1000
  const seconds = params.horizonSeconds
  const settings = params.poll
  const pooler = params.pooler
  const ceiling = pooler.backendCeiling
  const acquisition = params.acquisition
  const failfast = acquisition.kind === "failfast"
  const retry = acquisition.kind === "retry" ? acquisition.retry : RetryBackoff.reference
  const connectTimeout = acquisition.kind === "failfast" ? acquisition.connectTimeoutMillis : Infinity
  const workProbability = params.work.probability
  const handlerMillis = params.work.handlerMillis
  const recordClaims = options.recordClaims ?? 0
  const random = Prng.make(params.seed)
  const api = params.api
  // Open-loop API requests live in slots after the derivers, recycled through a free list.
  const apiSlots = api.requestsPerSecond > 0
    ? Math.ceil(api.requestsPerSecond * (retry.budgetMillis + pooler.queueTimeoutMillis + 60_000) / 1000) + 64
    : 0
  const size = n + apiSlots
  const freeApi: Array<number> = []
  for (let k = size - 1; k >= n; k--) freeApi.push(k)
  let apiDropped = 0

  // Deriver (and API request) state.
  const phase = new Uint8Array(size)
  const generation = new Int32Array(size)
  const pollStart = new Float64Array(size)
  const retries = new Int32Array(size)
  const current = new Float64Array(size)
  const busyUntil = new Float64Array(size)
  const holdsSlot = new Uint8Array(size)

  // Pooler and database state.
  const events = new EventQueue(Math.max(1024, 2 * n))
  const poolerQueue = new IntQueue(1024)
  const freeThreads: Array<number> = []
  for (let k = pooler.threads - 1; k >= 0; k--) freeThreads.push(k)
  const threadJob = new Int32Array(pooler.threads)
  const threadTag = new Int32Array(pooler.threads)
  const waiting = new IntQueue(1024)
  const database = new ProcessorSharing(params.database.cores, params.database.contention)
  let waitingCount = 0
  let active = 0
  let clients = 0
  let spikeWanted = 0
  let spikeHeld = 0

  // Statistics.
  const series: Series = {
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
  let second = 0
  let boundary = 1000
  let lastTime = 0
  let areaActive = 0
  let areaClients = 0
  let peakActive = 0
  let peakClients = 0
  let polls = 0
  let claimStarts = 0
  let claimsCompleted = 0
  let attempts = 0
  let rejections = 0
  let timeouts = 0
  let failedPolls = 0
  let apiRequests = 0
  let apiServed = 0
  let apiFailed = 0
  const claimStartTimes: Array<{ deriver: number; atMillis: number }> = []

  /** Closes every whole second up to `t`, then accumulates the time-weighted areas. */
  const tick = (t: number) => {
    while (t >= boundary && second < seconds) {
      areaActive += active * (boundary - lastTime)
      areaClients += clients * (boundary - lastTime)
      series.meanActiveBackends[second] = areaActive / 1000
      series.meanClientConnections[second] = areaClients / 1000
      series.activeBackends[second] = peakActive
      series.clientConnections[second] = peakClients
      areaActive = 0
      areaClients = 0
      peakActive = active
      peakClients = clients
      lastTime = boundary
      boundary += 1000
      second++
    }
    if (second < seconds) {
      areaActive += active * (t - lastTime)
      areaClients += clients * (t - lastTime)
      lastTime = t
    }
  }
  const countIn = (s: Float64Array) => {
    if (second < seconds) s[second]!++
  }

  /** Ends a poll with an outcome: the deriver's own scheduling decides the next sleep and backoff. */
  const finishPoll = (i: number, outcome: Scheduling.Outcome, t: number) => {
    generation[i]!++
    phase[i] = IDLE
    const u = Scheduling.needsDraw(outcome, settings) ? random() : 0
    const decision = Scheduling.decide(settings, { currentMillis: current[i]! }, outcome, u)
    current[i] = decision.state.currentMillis
    events.push(t + decision.sleepMillis, WAKE, i, 0)
  }

  const dispatchPooler = (t: number) => {
    while (freeThreads.length > 0 && poolerQueue.shift()) {
      const job = poolerQueue.shiftedValue
      const tag = poolerQueue.shiftedTag
      const i = job >> 1
      const kind = job & 1
      // A client that gave up before its handshake started costs the pooler nothing.
      if (kind === JOB_ATTEMPT && (generation[i] !== tag || phase[i] !== ATTEMPT)) continue
      const thread = freeThreads.pop()!
      threadJob[thread] = job
      threadTag[thread] = tag
      const cost = kind === JOB_RELAY
        ? pooler.relayCostMillis
        : holdsSlot[i] === 1
        ? pooler.connectCostMillis
        : pooler.rejectCostMillis
      events.push(t + cost, POOLER_DONE, thread, 0)
    }
  }

  const startAttempt = (i: number, t: number) => {
    phase[i] = ATTEMPT
    // The pooler counts a client from the moment it accepts the TCP connection; beyond its limit the attempt
    // is refused once the pooler gets to it (EMAXCONN after the startup packet).
    if (clients < pooler.maxClientConnections) {
      clients++
      holdsSlot[i] = 1
    }
    attempts++
    countIn(series.connectionAttempts)
    poolerQueue.push((i << 1) | JOB_ATTEMPT, generation[i]!)
    dispatchPooler(t)
  }

  const grant = (i: number, t: number) => {
    phase[i] = CLAIM
    active++
    if (i >= n) {
      database.add(t, i, api.queryMillis)
      return
    }
    claimStarts++
    countIn(series.claimStarts)
    if (claimStartTimes.length < recordClaims) claimStartTimes.push({ deriver: i, atMillis: t })
    database.add(t, i, params.database.claimMillis)
  }

  /** Hands free backends to the spike's queries first, then to waiting clients in arrival order. */
  const assignBackends = (t: number) => {
    while (active < ceiling) {
      if (spikeHeld < spikeWanted) {
        spikeHeld++
        active++
        database.addExternal(t, 1)
        continue
      }
      if (waitingCount === 0) break
      waiting.shift()
      const i = waiting.shiftedValue
      if (generation[i] !== waiting.shiftedTag || phase[i] !== WAITING) continue
      waitingCount--
      grant(i, t)
    }
  }

  const acquisitionFailed = (i: number, t: number) => {
    if (failfast || RetryBackoff.exhausted(retry, t - pollStart[i]!)) {
      if (i >= n) {
        apiFailed++
        releaseApi(i)
        return
      }
      failedPolls++
      countIn(series.failedPolls)
      finishPoll(i, "error", t)
      return
    }
    retries[i]!++
    generation[i]!++
    phase[i] = RETRY_SLEEP
    events.push(t + RetryBackoff.waitFrom(retry, retries[i]!, random()), RETRY_WAKE, i, generation[i]!)
  }

  const attemptDone = (i: number, tag: number, t: number) => {
    if (generation[i] !== tag || phase[i] !== ATTEMPT) return // the client gave up meanwhile
    if (holdsSlot[i] === 0) {
      rejections++
      countIn(series.rejections)
      acquisitionFailed(i, t)
      return
    }
    if (active < ceiling && waitingCount === 0 && spikeHeld >= spikeWanted) {
      grant(i, t)
    } else {
      phase[i] = WAITING
      waitingCount++
      waiting.push(i, generation[i]!)
      if (pooler.queueTimeoutMillis < connectTimeout) {
        events.push(t + pooler.queueTimeoutMillis, QUEUE_TIMEOUT, i, generation[i]!)
      }
    }
  }

  const relayDone = (i: number, t: number) => {
    active--
    clients--
    holdsSlot[i] = 0
    if (i >= n) {
      apiServed++
      assignBackends(t)
      releaseApi(i)
      return
    }
    claimsCompleted++
    countIn(series.claimsCompleted)
    assignBackends(t)
    if (workProbability > 0 && random() < workProbability) {
      busyUntil[i] = t + handlerMillis
      finishPoll(i, "claimed", t)
    } else {
      finishPoll(i, "empty", t)
    }
  }

  const releaseApi = (i: number) => {
    generation[i]!++
    phase[i] = IDLE
    freeApi.push(i)
  }

  /** An API request arrives (open loop): it acquires a connection with the same policy as the derivers. */
  /** A new acquisition for client `i` (a poll or an API request): its first attempt, and the connect timeout when failing fast. */
  const beginAcquisition = (i: number, t: number) => {
    generation[i]!++
    pollStart[i] = t
    retries[i] = 0
    if (failfast) events.push(t + connectTimeout, CONNECT_TIMEOUT, i, generation[i]!)
    startAttempt(i, t)
  }

  const apiArrival = (t: number) => {
    events.push(t - Math.log(1 - random()) * 1000 / api.requestsPerSecond, API_ARRIVAL, 0, 0)
    const i = freeApi.pop()
    if (i === undefined) {
      apiDropped++
      return
    }
    apiRequests++
    beginAcquisition(i, t)
  }

  const wake = (i: number, t: number) => {
    polls++
    if (t < busyUntil[i]!) {
      // The deriver's one worker is still busy: no poll, a jittered base sleep.
      generation[i]!++
      finishPoll(i, "busy", t)
      return
    }
    beginAcquisition(i, t)
  }

  /** The connect timeout (failfast) or the pooler's queue timeout fired for a client still acquiring. */
  const acquisitionTimedOut = (i: number, t: number) => {
    if (phase[i] === WAITING) waitingCount--
    if (holdsSlot[i] === 1) {
      clients--
      holdsSlot[i] = 0
    }
    timeouts++
    countIn(series.timeouts)
    acquisitionFailed(i, t)
  }

  // Initial conditions.
  const initial = Scheduling.initialState(settings, params.initialInterval)
  for (let i = 0; i < n; i++) {
    if (params.start === "aligned") {
      current[i] = initial.currentMillis
      const u = params.startupJitterMillis > 0 ? random() : 0
      events.push(Scheduling.startupDelay(params.startupJitterMillis, u), WAKE, i, 0)
    } else {
      current[i] = settings.enabled ? settings.maxMillis : settings.baseMillis
      events.push(random() * current[i]!, WAKE, i, 0)
    }
  }
  if (api.requestsPerSecond > 0) events.push(0, API_ARRIVAL, 0, 0)
  if (params.spike !== undefined) {
    events.push(params.spike.atSeconds * 1000, SPIKE_START, 0, 0)
    events.push((params.spike.atSeconds + params.spike.seconds) * 1000, SPIKE_END, 0, 0)
  }

  let processed = 0
  let lastProgress = clock()
  for (;;) {
    const tEvent = events.peekTime()
    const tDatabase = database.nextCompletion()
    const t = tEvent <= tDatabase ? tEvent : tDatabase
    if (t >= horizonMillis) break
    tick(t)
    if (tDatabase < tEvent) {
      const i = database.complete(t)
      // The result travels back through the pooler; the backend is held until the relay is done.
      poolerQueue.push((i << 1) | JOB_RELAY, 0)
      dispatchPooler(t)
    } else {
      events.pop()
      const i = events.poppedSubject
      const tag = events.poppedTag
      switch (events.poppedKind) {
        case WAKE:
          wake(i, t)
          break
        case POOLER_DONE: {
          const job = threadJob[i]!
          const jobTag = threadTag[i]!
          freeThreads.push(i)
          if ((job & 1) === JOB_ATTEMPT) attemptDone(job >> 1, jobTag, t)
          else relayDone(job >> 1, t)
          dispatchPooler(t)
          break
        }
        case CONNECT_TIMEOUT:
          if (generation[i] === tag && (phase[i] === ATTEMPT || phase[i] === WAITING)) acquisitionTimedOut(i, t)
          break
        case QUEUE_TIMEOUT:
          if (generation[i] === tag && phase[i] === WAITING) acquisitionTimedOut(i, t)
          break
        case RETRY_WAKE:
          if (generation[i] === tag && phase[i] === RETRY_SLEEP) startAttempt(i, t)
          break
        case API_ARRIVAL:
          apiArrival(t)
          break
        case SPIKE_START:
          spikeWanted = params.spike?.backends ?? 0
          assignBackends(t)
          break
        case SPIKE_END:
          spikeWanted = 0
          database.addExternal(t, -spikeHeld)
          active -= spikeHeld
          spikeHeld = 0
          assignBackends(t)
          break
      }
    }
    if (active > peakActive) peakActive = active
    if (clients > peakClients) peakClients = clients
    if ((++processed & 0xffff) === 0 && options.onProgress !== undefined) {
      const now = clock()
      if (now - lastProgress >= 500) {
        lastProgress = now
        options.onProgress({
          simulatedSeconds: t / 1000,
          horizonSeconds: params.horizonSeconds,
          events: processed,
          activeBackends: active,
          clientConnections: clients
        })
      }
    }
  }
  tick(horizonMillis)

  return {
    params,
    series,
    totals: {
      polls,
      claimStarts,
      claimsCompleted,
      connectionAttempts: attempts,
      rejections,
      timeouts,
      failedPolls,
      apiRequests,
      apiServed,
      apiFailed,
      apiDropped,
      events: processed
    },
    claimStartTimes,
    wallMillis: clock() - wallStart
  }
}
