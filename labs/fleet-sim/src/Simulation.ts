/**
 * The discrete-event simulation: N derivers, one pooler, one database, one seeded generator. Every
 * scheduling decision a deriver takes (startup delay, each sleep, backoff growth, reset) comes from
 * `@resilience/deriver`'s `Scheduling` module, the code the real loop runs; only the removed connection
 * retry ({@link RetryBackoff}) is written here.
 *
 * How to read it: {@link run} builds a `World`, schedules the start (`scheduleStart`), then repeats one step
 * until the horizon (`runToHorizon`): the next thing that happens is either a database query finishing
 * (`queryDone`) or a timed event (`handleEvent`), and each kind of event has a method named for it. A client
 * (a deriver's poll or an API request) goes through these steps:
 *
 *   wake → beginAcquisition → startAttempt → (pooler handshake) attemptDone
 *     → grant (a backend at once) or queue for one (assignBackends grants it later)
 *     → queryDone → (pooler relay) relayDone → finishPoll (the deriver's scheduling) → wake …
 *
 * and a failed acquisition (refused, connect or queue timeout) goes through `acquisitionFailed`: the poll
 * ends with an error, or the removed retry sleeps and attempts again.
 *
 * Under the `adaptive` policy three more steps exist: a claim still running at its statement timeout is
 * cancelled (`claimTimedOut`), each poll's outcome carries an overload signal into the deriver's
 * `Overload.decide` (slow, cancelled, unavailable), and an API request passes its instance's admission gate
 * first (`apiArrival` → `admitApi` or `shedApi`; `apiDone` tells the gate how it went).
 *
 * With the wake path (`Model.Wake`), an API write that is served gives its tenant a unit of work and, when the
 * wake is on, reaches the tenant's deriver `delayMillis` later (`wakeArrives`). What the deriver does with it
 * is `@resilience/wake`'s `Coalesce`, the decision the deriver's loop runs, on a state per deriver: idle, it
 * polls now (no sooner than the minimum interval after its last poll started) with its schedule reset to the
 * base interval (`wokenPoll`); with a poll in flight it folds the wake into one more poll when that poll ends
 * (`finishPoll`); a woken poll that fails restores the schedule it had before the wake and disarms wakes until
 * a poll succeeds; a sleep under an overload floor is not ended by a wake. The `outage` scenario refuses every
 * attempt while the database is down (`attemptDone`) and then sends each tenant's resent write (`resend`),
 * again and again until one is served.
 *
 * The hot loop is plain TypeScript over typed arrays: an event heap, FIFO ring buffers, a processor-sharing
 * database, no allocation per event beyond the deriver's own decision objects.
 *
 * @since 0.1.0
 */
import { Overload, Scheduling } from "@resilience/deriver"
import { Jitter, PollBackoff } from "@resilience/jitter"
import { Coalesce } from "@resilience/wake"
import { EventQueue } from "./EventQueue.ts"
import * as Gate from "./Gate.ts"
import { IntQueue } from "./IntQueue.ts"
import type * as Model from "./Model.ts"
import * as Prng from "./Prng.ts"
import { ProcessorSharing } from "./ProcessorSharing.ts"
import * as Recorder from "./Recorder.ts"
import * as RetryBackoff from "./RetryBackoff.ts"

/**
 * Per-second series, index = simulated second (see {@link Recorder.Series}).
 *
 * @since 0.1.0
 */
export type Series = Recorder.Series

/**
 * @since 0.1.0
 */
export const seriesNames: ReadonlyArray<keyof Series> = Recorder.seriesNames

/**
 * Totals of a run (see {@link Recorder.Totals}).
 *
 * @since 0.1.0
 */
export type Totals = Recorder.Totals

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
  /**
   * With writes (`Model.Wake`): for each claim of a tenant's written work, milliseconds from its oldest write
   * being served to the claim's end (the pickup), in claim order.
   *
   * @since 0.3.0
   */
  readonly pickups?: ReadonlyArray<number> | undefined
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
 * One poll of a deriver, as {@link RunOptions.onPoll} sees it once the deriver has decided what follows.
 *
 * @since 0.3.0
 */
export interface Poll {
  readonly deriver: number
  /** When the poll started (for a `busy` poll, which makes no query: when it ended). */
  readonly startedAtMillis: number
  readonly endedAtMillis: number
  readonly outcome: Scheduling.Outcome
  /** Whether a wake made this poll (it ended the sleep before it, or came while the last was in flight). */
  readonly woken: boolean
  /** The deriver's poll interval after the decision (its `PollBackoff.State`). */
  readonly intervalMillis: number
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
  /**
   * Called as each deriver's poll ends, after its decision (for tests that follow a deriver poll by poll).
   *
   * @since 0.3.0
   */
  readonly onPoll?: ((poll: Poll) => void) | undefined
}

/**
 * Runs one simulation to its horizon. Deterministic: the same parameters (seed included) give the same
 * outcome.
 *
 * @since 0.1.0
 */
export const run = (params: Model.Params, options: RunOptions = {}): Outcome => {
  const clock = options.now ?? (() => performance.now())
  const wallStart = clock()
  const world = new World(params, options.recordClaims ?? 0, options.onPoll)
  world.scheduleStart()
  world.runToHorizon(progressReporter(world, clock, options.onProgress))
  return {
    params,
    series: world.recorder.series,
    totals: world.recorder.totals,
    claimStartTimes: world.claimStartTimes,
    pickups: world.pickups,
    wallMillis: clock() - wallStart
  }
}

/** Calls `onProgress` at most every 500 ms of wall time (the loop asks every 65,536 events). */
const progressReporter = (
  world: World,
  clock: () => number,
  onProgress: ((progress: Progress) => void) | undefined
): (t: number) => void => {
  if (onProgress === undefined) return () => {}
  let lastProgress = clock()
  return (t) => {
    const now = clock()
    if (now - lastProgress < 500) return
    lastProgress = now
    onProgress({
      simulatedSeconds: t / 1000,
      horizonSeconds: world.params.horizonSeconds,
      events: world.recorder.totals.events,
      activeBackends: world.active,
      clientConnections: world.clients
    })
  }
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
const CLAIM_TIMEOUT = 8
const GATE_TIMEOUT = 9
const WAKE_ARRIVES = 10
const RESEND = 11

// Client phases.
const IDLE = 0
const ATTEMPT = 1
const WAITING = 2
const CLAIM = 3
const RETRY_SLEEP = 4
const RELAY = 5
const GATE_WAIT = 6

// Pooler job kinds (the low bit of a job; the client is the rest).
const JOB_ATTEMPT = 0
const JOB_RELAY = 1

/**
 * The simulated system. Clients `0 … derivers − 1` are the derivers; the slots after them hold open-loop API
 * requests, recycled through a free list. Per-client state lives in typed arrays indexed by client; a
 * client's `generation` grows whenever it moves on, so a timed event tagged with an older generation is
 * stale and ignored.
 */
class World {
  readonly params: Model.Params
  readonly recorder: Recorder.Recorder
  readonly claimStartTimes: Array<{ deriver: number; atMillis: number }> = []
  readonly pickups: Array<number> = []
  private readonly recordClaims: number
  private readonly onPoll: ((poll: Poll) => void) | undefined
  private readonly random: () => number
  private readonly derivers: number
  private readonly failfast: boolean
  private readonly retry: RetryBackoff.Settings
  private readonly connectTimeout: number

  // Per client.
  private readonly phase: Uint8Array
  private readonly generation: Int32Array
  private readonly pollStart: Float64Array
  private readonly retries: Int32Array
  /** The deriver's current poll interval (its `PollBackoff.State`). */
  private readonly current: Float64Array
  /** Until when the deriver's one worker runs a claimed unit's handler. */
  private readonly busyUntil: Float64Array
  /** Whether the client holds one of the pooler's client slots. */
  private readonly holdsSlot: Uint8Array
  /** The deriver's overload floor and since when it falls (its `Overload.State`). */
  private readonly floor: Float64Array
  private readonly healthySince: Float64Array
  /** The database's token for the client's running query, and whether it was cancelled. */
  private readonly jobToken: Int32Array
  private readonly cancelled: Uint8Array
  private readonly freeApi: Array<number> = []

  // The wake path: whether wakes are on, each deriver's coalescing state, the schedule it had before a wake
  // reset it (NaN: the next poll is not a woken one), whether its current sleep may be ended by a wake (not
  // under an overload floor, not the startup delay), the units of work writes gave a tenant, whether a
  // tenant's resent write is served and not yet processed, and each API request's tenant (-1: background
  // traffic, a write only by the write fraction's draw).
  private readonly wakeOn: boolean
  private readonly wakeMinIntervalMillis: number
  /** Each deriver's `Coalesce.State`, field by field (a state object lives only for the decision's call). */
  private readonly wakeInFlight: Uint8Array
  private readonly wakeWaiting: Uint8Array
  private readonly wakeArmed: Uint8Array
  private readonly wakeLastStarted: Float64Array
  private readonly beforeWake: Float64Array
  private readonly sleepWakeable: Uint8Array
  /** Whether the deriver's last poll failed, and the candidate spread of a woken poll after one (`Model.Wake`). */
  private readonly lastFailed: Uint8Array
  private readonly spreadAfterFailureMillis: number
  private readonly pendingWork: Int32Array
  /** When the oldest write of the tenant's pending work was served. */
  private readonly workSince: Float64Array
  private readonly resendOutstanding: Uint8Array
  private readonly tenantOf: Int32Array
  private readonly outageFrom: number
  private readonly outageUntil: number

  // The API's admission gates, one per instance, and each admitted request's gate, start and load.
  private readonly gates: Array<Gate.Gate> = []
  private readonly gateOf: Int32Array
  private readonly admittedAt: Float64Array
  private readonly inFlightAtAdmit: Int32Array
  private readonly probe: Uint8Array

  // The pooler: handshakes and relays queue for its threads; accepted clients queue for a backend.
  private readonly events: EventQueue
  private readonly poolerQueue = new IntQueue(1024)
  private readonly freeThreads: Array<number> = []
  private readonly threadJob: Int32Array
  private readonly threadTag: Int32Array
  private readonly waiting = new IntQueue(1024)
  private waitingCount = 0
  /** Backends in use (claims, API queries, the spike's queries). */
  active = 0
  /** Client connections the pooler holds. */
  clients = 0

  // The database and the spike's load on it.
  private readonly database: ProcessorSharing
  private spikeWanted = 0
  private spikeHeld = 0

  constructor(params: Model.Params, recordClaims: number, onPoll: ((poll: Poll) => void) | undefined) {
    this.params = params
    this.recordClaims = recordClaims
    this.onPoll = onPoll
    this.random = Prng.make(params.seed)
    this.recorder = new Recorder.Recorder(params.horizonSeconds)
    const n = params.derivers
    this.derivers = n
    const acquisition = params.acquisition
    this.failfast = acquisition.kind === "failfast"
    this.retry = acquisition.kind === "retry" ? acquisition.retry : RetryBackoff.reference
    this.connectTimeout = acquisition.kind === "failfast" ? acquisition.connectTimeoutMillis : Infinity

    const apiSlots = params.api.requestsPerSecond > 0
      ? Math.ceil(
        params.api.requestsPerSecond * (this.retry.budgetMillis + params.pooler.queueTimeoutMillis + 60_000) / 1000
      ) + 64
      : 0
    const size = n + apiSlots + (params.outage === undefined ? 0 : n)
    for (let k = size - 1; k >= n; k--) this.freeApi.push(k)
    this.phase = new Uint8Array(size)
    this.generation = new Int32Array(size)
    this.pollStart = new Float64Array(size)
    this.retries = new Int32Array(size)
    this.current = new Float64Array(size)
    this.busyUntil = new Float64Array(size)
    this.holdsSlot = new Uint8Array(size)
    this.floor = new Float64Array(size)
    this.healthySince = new Float64Array(size).fill(Infinity)
    this.jobToken = new Int32Array(size)
    this.cancelled = new Uint8Array(size)
    this.gateOf = new Int32Array(size)
    this.admittedAt = new Float64Array(size)
    this.inFlightAtAdmit = new Int32Array(size)
    this.probe = new Uint8Array(size)
    this.wakeOn = params.wake?.enabled === true
    this.wakeMinIntervalMillis = params.wake?.minIntervalMillis ?? 0
    const m = this.wakeOn ? n : 0
    this.wakeInFlight = new Uint8Array(m).fill(Coalesce.initial.inFlight ? 1 : 0)
    this.wakeWaiting = new Uint8Array(m).fill(Coalesce.initial.waiting ? 1 : 0)
    this.wakeArmed = new Uint8Array(m).fill(Coalesce.initial.armed ? 1 : 0)
    this.wakeLastStarted = new Float64Array(m).fill(Coalesce.initial.lastStartedAtMillis)
    this.beforeWake = new Float64Array(n).fill(NaN)
    // a spread fleet has been running (asleep on its schedule); an aligned one is in its startup delay
    this.sleepWakeable = new Uint8Array(n).fill(params.start === "spread" ? 1 : 0)
    this.lastFailed = new Uint8Array(n)
    this.spreadAfterFailureMillis = params.wake?.spreadAfterFailureMillis ?? 0
    this.pendingWork = new Int32Array(n)
    this.workSince = new Float64Array(n)
    this.resendOutstanding = new Uint8Array(n)
    this.tenantOf = new Int32Array(size).fill(-1)
    this.outageFrom = params.outage === undefined ? Infinity : params.outage.atSeconds * 1000
    this.outageUntil = params.outage === undefined ? Infinity : (params.outage.atSeconds + params.outage.seconds) * 1000
    const admission = params.admission
    if (admission !== undefined && admission.gate.enabled) {
      for (let g = 0; g < admission.instances; g++) this.gates.push(new Gate.Gate(admission.gate, this.random))
    }

    this.events = new EventQueue(Math.max(1024, 2 * n))
    for (let k = params.pooler.threads - 1; k >= 0; k--) this.freeThreads.push(k)
    this.threadJob = new Int32Array(params.pooler.threads)
    this.threadTag = new Int32Array(params.pooler.threads)
    this.database = new ProcessorSharing(params.database.cores, params.database.contention)
  }

  /** The initial conditions: each deriver's first wake-up, the first API arrival, the spike. */
  scheduleStart(): void {
    const params = this.params
    const settings = params.poll
    const initial = Scheduling.initialState(settings, params.initialInterval)
    for (let i = 0; i < this.derivers; i++) {
      if (params.start === "aligned") {
        this.current[i] = initial.currentMillis
        const u = params.startupJitterMillis > 0 ? this.random() : 0
        this.events.push(Scheduling.startupDelay(params.startupJitterMillis, u), WAKE, i, 0)
      } else {
        this.current[i] = settings.enabled ? settings.maxMillis : settings.baseMillis
        this.events.push(this.random() * this.current[i]!, WAKE, i, 0)
      }
    }
    if (params.api.requestsPerSecond > 0) this.events.push(0, API_ARRIVAL, 0, 0)
    if (params.spike !== undefined) {
      this.events.push(params.spike.atSeconds * 1000, SPIKE_START, 0, 0)
      this.events.push((params.spike.atSeconds + params.spike.seconds) * 1000, SPIKE_END, 0, 0)
    }
    if (params.outage !== undefined) {
      for (let k = 0; k < this.derivers; k++) {
        this.events.push(this.outageUntil + this.random() * params.outage.resendWindowMillis, RESEND, k, 0)
      }
    }
  }

  /** Processes events in time order until the horizon; `report(t)` every 65,536 events. */
  runToHorizon(report: (t: number) => void): void {
    const horizonMillis = this.params.horizonSeconds * 1000
    const recorder = this.recorder
    for (;;) {
      const tEvent = this.events.peekTime()
      const tDatabase = this.database.nextCompletion()
      const t = tEvent <= tDatabase ? tEvent : tDatabase
      if (t >= horizonMillis) break
      recorder.tick(t, this.active, this.clients)
      if (tDatabase < tEvent) this.queryDone(t)
      else this.handleEvent(t)
      recorder.observe(this.active, this.clients)
      if ((++recorder.totals.events & 0xffff) === 0) report(t)
    }
    recorder.tick(horizonMillis, this.active, this.clients)
  }

  /** Pops the next timed event and hands it to the step named for its kind. */
  private handleEvent(t: number): void {
    const events = this.events
    events.pop()
    const i = events.poppedSubject
    const tag = events.poppedTag
    switch (events.poppedKind) {
      case WAKE:
        // a wake from the API may have started a poll since this sleep was decided
        if (this.isCurrent(i, tag) && this.phase[i] === IDLE) this.wake(i, t)
        break
      case WAKE_ARRIVES:
        this.wakeArrives(i, t)
        break
      case RESEND:
        this.resend(i, t)
        break
      case POOLER_DONE:
        this.poolerDone(i, t)
        break
      case CONNECT_TIMEOUT:
        if (this.isCurrent(i, tag) && (this.phase[i] === ATTEMPT || this.phase[i] === WAITING)) {
          this.acquisitionTimedOut(i, t)
        }
        break
      case QUEUE_TIMEOUT:
        if (this.isCurrent(i, tag) && this.phase[i] === WAITING) this.acquisitionTimedOut(i, t)
        break
      case RETRY_WAKE:
        if (this.isCurrent(i, tag) && this.phase[i] === RETRY_SLEEP) this.startAttempt(i, t)
        break
      case API_ARRIVAL:
        this.apiArrival(t)
        break
      case SPIKE_START:
        this.spikeStart(t)
        break
      case SPIKE_END:
        this.spikeEnd(t)
        break
      case CLAIM_TIMEOUT:
        if (this.isCurrent(i, tag) && this.phase[i] === CLAIM) this.claimTimedOut(i, t)
        break
      case GATE_TIMEOUT:
        if (this.isCurrent(i, tag) && this.phase[i] === GATE_WAIT) this.shedApi(i, t)
        break
    }
  }

  private isCurrent(i: number, tag: number): boolean {
    return this.generation[i] === tag
  }

  // A deriver's poll.

  /**
   * A deriver wakes: it polls, unless its one worker is still busy (then a jittered base sleep). As the real
   * loop, the poll starts in the wakes' state (`Coalesce.started`: it covers every wake before it).
   */
  private wake(i: number, t: number): void {
    this.recorder.totals.polls++
    if (this.wakeOn) this.wakesStarted(i, t)
    if (t < this.busyUntil[i]!) {
      this.generation[i]!++
      this.finishPoll(i, "busy", t, "none")
      return
    }
    this.beginAcquisition(i, t)
  }

  /**
   * Ends a poll with an outcome: the deriver's own scheduling decides the next sleep and backoff; with
   * overload signals on, its `Overload.decide` with this poll's signal.
   */
  private finishPoll(i: number, outcome: Scheduling.Outcome, t: number, signal: Overload.Signal): void {
    const settings = this.params.poll
    const overload = this.params.overload
    this.generation[i]!++
    this.phase[i] = IDLE
    const woken = this.wakeOn && !Number.isNaN(this.beforeWake[i]!)
    const again = this.wakeOn && this.wakesFinished(i, outcome)
    if (overload === undefined) {
      const u = Scheduling.needsDraw(outcome, settings) ? this.random() : 0
      const decision = Scheduling.decide(settings, { currentMillis: this.current[i]! }, outcome, u)
      this.current[i] = decision.state.currentMillis
      if (this.onPoll !== undefined) this.observePoll(i, outcome, t, woken)
      if (this.wakeOn) this.sleepWakeable[i] = 1
      if (again && decision.sleepMillis > 0) {
        this.wokenPoll(i, t)
        return
      }
      this.events.push(t + decision.sleepMillis, WAKE, i, this.generation[i]!)
      return
    }
    const state: Overload.State = { floorMillis: this.floor[i]!, healthySinceMillis: this.healthySince[i]! }
    const u = Overload.needsDraw(outcome, signal, settings) ? this.random() : 0
    const decision = Overload.decide({
      settings: overload,
      backoff: settings,
      schedule: { currentMillis: this.current[i]! },
      overload: state,
      outcome,
      signal,
      nowMillis: t,
      u
    })
    this.current[i] = decision.schedule.currentMillis
    this.floor[i] = decision.overload.floorMillis
    this.healthySince[i] = decision.overload.healthySinceMillis
    if (this.onPoll !== undefined) this.observePoll(i, outcome, t, woken)
    // As the real loop: wakes end a sleep unless the overload floor imposes it; a wake that came during the
    // poll makes the next poll now (unless the poll is due at once anyway: that poll covers it).
    if (this.wakeOn) this.sleepWakeable[i] = decision.floorMillis === 0 ? 1 : 0
    if (again && decision.sleepMillis > 0 && decision.floorMillis === 0) {
      this.wokenPoll(i, t)
      return
    }
    // As the real loop, a busy sleep that may be woken ends when the worker is freed.
    const sleepUntil = t + decision.sleepMillis
    const wakeAt = decision.wakeable && this.busyUntil[i]! < sleepUntil ? this.busyUntil[i]! : sleepUntil
    this.events.push(wakeAt, WAKE, i, this.generation[i]!)
  }

  private wakeState(i: number): Coalesce.State {
    return {
      inFlight: this.wakeInFlight[i] === 1,
      waiting: this.wakeWaiting[i] === 1,
      armed: this.wakeArmed[i] === 1,
      lastStartedAtMillis: this.wakeLastStarted[i]!
    }
  }

  private setWakeState(i: number, state: Coalesce.State): void {
    this.wakeInFlight[i] = state.inFlight ? 1 : 0
    this.wakeWaiting[i] = state.waiting ? 1 : 0
    this.wakeArmed[i] = state.armed ? 1 : 0
    this.wakeLastStarted[i] = state.lastStartedAtMillis
  }

  private observePoll(i: number, outcome: Scheduling.Outcome, t: number, woken: boolean): void {
    this.onPoll!({
      deriver: i,
      startedAtMillis: outcome === "busy" ? t : this.pollStart[i]!,
      endedAtMillis: t,
      outcome,
      woken,
      intervalMillis: this.current[i]!
    })
  }

  // The wake path: the deriver's coalescing (`Coalesce`), as its loop runs it.

  /**
   * A wake reaches deriver `i` and `Coalesce.wake` decides: `pollNow` (idle: the sleep it is in ends, unless
   * a wake may not end it: then the poll after the sleep covers the wake, counted `held` when it starts),
   * `oneMoreAfter` (a poll is in flight: decided when it ends), `coalesced` (one is waiting already) or
   * `ignored` (a woken poll failed, no poll has succeeded since, and the last started less than a base interval ago).
   */
  private wakeArrives(i: number, t: number): void {
    const totals = this.recorder.totals
    totals.wakes++
    // re-armed a base interval after the last poll started, as the deriver's loop does (`PollLoop` wakeRearmMillis)
    const [decision, next] = Coalesce.wake(this.wakeState(i), t, this.params.poll.baseMillis)
    this.setWakeState(i, next)
    if (decision === "coalesced") totals.wakesCoalesced++
    else if (decision === "ignored") totals.wakesIgnored++
    else if (decision === "pollNow" && this.sleepWakeable[i] === 1) this.wokenPoll(i, t)
  }

  /**
   * A wake ends deriver `i`'s sleep at `t`: the poll it was sleeping towards is superseded by a woken poll,
   * no sooner than the minimum interval after the last poll started (`Coalesce.delayMillis`); the schedule
   * starts again from its base, and the one before is kept in case the woken poll fails.
   */
  private wokenPoll(i: number, t: number): void {
    let delay = Coalesce.delayMillis(this.wakeState(i), this.wakeMinIntervalMillis, t)
    if (this.spreadAfterFailureMillis > 0 && this.lastFailed[i] === 1) {
      delay = Math.max(delay, Jitter.startupDelayFrom(this.spreadAfterFailureMillis, this.random()))
    }
    this.beforeWake[i] = this.current[i]!
    this.current[i] = PollBackoff.initial(this.params.poll).currentMillis
    this.generation[i]!++
    this.events.push(t + delay, WAKE, i, this.generation[i]!)
  }

  /**
   * Deriver `i`'s poll starts (`Coalesce.started`). A wake waiting then is taken by it: a woken poll's own
   * (`wakePolls`), or one that the poll covers anyway: `held` if the sleep before it was one a wake may not
   * end (an overload floor's, the startup delay), else `coalesced` (the poll due at once after a claim).
   */
  private wakesStarted(i: number, t: number): void {
    const state = this.wakeState(i)
    const totals = this.recorder.totals
    if (!Number.isNaN(this.beforeWake[i]!)) totals.wakePolls++
    else if (state.waiting) {
      if (this.sleepWakeable[i] === 1) totals.wakesCoalesced++
      else totals.wakesHeld++
    }
    this.setWakeState(i, Coalesce.started(state, t))
  }

  /**
   * Deriver `i`'s poll ended with `outcome` (`Coalesce.finished`: a busy poll made no query). A woken poll
   * that failed restores the schedule it had before the wake (the outage schedule goes on as it was), drops
   * a wake waiting (counted `ignored`) and disarms wakes until a poll succeeds. Whether a wake came in during
   * the poll and asks for the next one now.
   */
  private wakesFinished(i: number, outcome: Scheduling.Outcome): boolean {
    const state = this.wakeState(i)
    const woken = !Number.isNaN(this.beforeWake[i]!)
    const finished = Coalesce.finished(
      state,
      outcome === "busy"
        ? { succeeded: false, woken: false }
        : { succeeded: outcome === "claimed" || outcome === "empty", woken }
    )
    if (woken && outcome === "error") {
      this.current[i] = this.beforeWake[i]!
      this.recorder.totals.wakePollsFailed++
    }
    if (state.waiting && !finished.state.waiting) this.recorder.totals.wakesIgnored++
    if (outcome !== "busy") this.lastFailed[i] = outcome === "error" ? 1 : 0
    this.beforeWake[i] = NaN
    this.setWakeState(i, finished.state)
    return finished.again
  }

  /**
   * A served API write: a unit of work for its tenant (the outage's resent write, or a background request
   * that the write fraction's draw makes a write), and the wake to its deriver when the wake is on.
   */
  private written(i: number, t: number): void {
    const wake = this.params.wake
    let tenant = this.tenantOf[i]!
    if (tenant >= 0) {
      const totals = this.recorder.totals
      totals.resendsServed++
      totals.lastResendServedMillis = t
      this.resendOutstanding[tenant] = 1
    } else if (wake !== undefined && wake.writeFraction > 0 && this.random() < wake.writeFraction) {
      tenant = Math.floor(this.random() * this.derivers)
    } else {
      return
    }
    this.recorder.totals.writes++
    if (this.pendingWork[tenant] === 0) this.workSince[tenant] = t
    this.pendingWork[tenant]!++
    if (wake !== undefined && wake.enabled) this.events.push(t + wake.delayMillis, WAKE_ARRIVES, tenant, 0)
  }

  /** Tenant `k`'s client resends its write after the database's restart (again after each failure). */
  private resend(k: number, t: number): void {
    const i = this.freeApi.pop()
    if (i === undefined) {
      this.recorder.totals.apiDropped++
      this.resendLater(k, t)
      return
    }
    this.tenantOf[i] = k
    this.apiRequest(i, t)
  }

  /** A resent write that was not served: its client tries again within the resend window. */
  private resendLater(k: number, t: number): void {
    this.events.push(t + this.random() * this.params.outage!.resendWindowMillis, RESEND, k, 0)
  }

  /** The signal of a claim that completed, `elapsed` after its poll began (checkout plus claim). */
  private signalOf(elapsed: number): Overload.Signal {
    const overload = this.params.overload
    return overload === undefined ? "none" : Overload.signalOf(overload, "succeeded", elapsed)
  }

  // An API request (open loop).

  /**
   * An API request arrives: the next arrival is drawn, and the request acquires a connection like a poll;
   * with admission gates, it first passes its instance's (requests go to the instances in turn): the circuit,
   * then a permit within the queueing bound, or it is shed without a connection attempt.
   */
  private apiArrival(t: number): void {
    this.events.push(t - Math.log(1 - this.random()) * 1000 / this.params.api.requestsPerSecond, API_ARRIVAL, 0, 0)
    const i = this.freeApi.pop()
    if (i === undefined) {
      this.recorder.totals.apiDropped++
      return
    }
    this.tenantOf[i] = -1
    this.apiRequest(i, t)
  }

  /** An API request in slot `i` (background traffic or a tenant's resent write) enters its gate, if any. */
  private apiRequest(i: number, t: number): void {
    const totals = this.recorder.totals
    totals.apiRequests++
    if (this.gates.length === 0) {
      this.beginAcquisition(i, t)
      return
    }
    const g = totals.apiRequests % this.gates.length
    const gate = this.gates[g]!
    this.gateOf[i] = g
    const entry = gate.enter(t)
    if (entry === "shed") {
      totals.apiShed++
      this.releaseApi(i, t)
      return
    }
    this.probe[i] = entry === "probe" ? 1 : 0
    if (gate.hasPermit()) {
      this.admitApi(i, t)
    } else if (gate.settings.queueTimeoutMillis > 0) {
      this.generation[i]!++
      this.phase[i] = GATE_WAIT
      gate.waiting.push(i, this.generation[i]!)
      this.events.push(t + gate.settings.queueTimeoutMillis, GATE_TIMEOUT, i, this.generation[i]!)
    } else {
      this.shedApi(i, t)
    }
  }

  /** The request takes a permit of its gate and starts acquiring a connection. */
  private admitApi(i: number, t: number): void {
    this.inFlightAtAdmit[i] = this.gates[this.gateOf[i]!]!.admit()
    this.admittedAt[i] = t
    this.beginAcquisition(i, t)
  }

  /** No permit within the queueing bound: the request is shed (a 503 without a connection attempt). */
  private shedApi(i: number, t: number): void {
    if (this.probe[i] === 1) this.gates[this.gateOf[i]!]!.probeShed()
    this.probe[i] = 0
    this.recorder.totals.apiShed++
    this.releaseApi(i, t)
  }

  /** The request is done (answered or unavailable): its gate learns from it and admits whoever waits. */
  private apiDone(i: number, t: number, outcome: Gate.Outcome): void {
    if (outcome === "Answered") this.written(i, t)
    if (this.gates.length === 0) {
      this.releaseApi(i, t, outcome === "Answered")
      return
    }
    const gate = this.gates[this.gateOf[i]!]!
    gate.finish(t, outcome, this.inFlightAtAdmit[i]!, t - this.admittedAt[i]!, this.probe[i] === 1)
    this.probe[i] = 0
    this.releaseApi(i, t, outcome === "Answered")
    while (gate.hasPermit() && gate.waiting.shift()) {
      const next = gate.waiting.shiftedValue
      if (this.isCurrent(next, gate.waiting.shiftedTag) && this.phase[next] === GATE_WAIT) this.admitApi(next, t)
    }
  }

  /** The request's slot goes back; a tenant's resent write that was not served is resent later. */
  private releaseApi(i: number, t: number, served = false): void {
    const tenant = this.tenantOf[i]!
    if (tenant >= 0 && !served) this.resendLater(tenant, t)
    this.tenantOf[i] = -1
    this.generation[i]!++
    this.phase[i] = IDLE
    this.freeApi.push(i)
  }

  // Acquiring a connection (the same policy for polls and API requests).

  /** A new acquisition for client `i`: its first attempt, and the connect timeout when failing fast. */
  private beginAcquisition(i: number, t: number): void {
    this.generation[i]!++
    this.pollStart[i] = t
    this.retries[i] = 0
    if (this.failfast) this.events.push(t + this.connectTimeout, CONNECT_TIMEOUT, i, this.generation[i]!)
    this.startAttempt(i, t)
  }

  /**
   * One connection attempt. The pooler counts a client from the moment it accepts the TCP connection; beyond
   * its limit the attempt is refused once the pooler gets to it (EMAXCONN after the startup packet).
   */
  private startAttempt(i: number, t: number): void {
    this.phase[i] = ATTEMPT
    if (this.clients < this.params.pooler.maxClientConnections) {
      this.clients++
      this.holdsSlot[i] = 1
    }
    this.recorder.count("connectionAttempts")
    this.poolerQueue.push((i << 1) | JOB_ATTEMPT, this.generation[i]!)
    this.dispatchPooler(t)
  }

  /** The pooler finished a handshake: refused, a backend at once, or a place in the queue for one. */
  private attemptDone(i: number, tag: number, t: number): void {
    if (!this.isCurrent(i, tag) || this.phase[i] !== ATTEMPT) return // the client gave up meanwhile
    if (this.holdsSlot[i] === 0) {
      this.recorder.count("rejections")
      this.acquisitionFailed(i, t)
      return
    }
    if (t >= this.outageFrom && t < this.outageUntil) {
      // the database is down: the pooler cannot open or lend a backend and refuses the client
      this.clients--
      this.holdsSlot[i] = 0
      this.recorder.count("rejections")
      this.acquisitionFailed(i, t)
      return
    }
    if (
      this.active < this.params.pooler.backendCeiling && this.waitingCount === 0 && this.spikeHeld >= this.spikeWanted
    ) {
      this.grant(i, t)
    } else {
      this.queueForBackend(i, t)
    }
  }

  private queueForBackend(i: number, t: number): void {
    this.phase[i] = WAITING
    this.waitingCount++
    this.waiting.push(i, this.generation[i]!)
    const queueTimeout = this.params.pooler.queueTimeoutMillis
    if (queueTimeout < this.connectTimeout) this.events.push(t + queueTimeout, QUEUE_TIMEOUT, i, this.generation[i]!)
  }

  /** The connect timeout (failfast) or the pooler's queue timeout fired for a client still acquiring. */
  private acquisitionTimedOut(i: number, t: number): void {
    if (this.phase[i] === WAITING) this.waitingCount--
    if (this.holdsSlot[i] === 1) {
      this.clients--
      this.holdsSlot[i] = 0
    }
    this.recorder.count("timeouts")
    this.acquisitionFailed(i, t)
  }

  /** Failing fast (or with the retry's budget spent) the poll or request fails; otherwise the retry sleeps. */
  private acquisitionFailed(i: number, t: number): void {
    if (this.failfast || RetryBackoff.exhausted(this.retry, t - this.pollStart[i]!)) {
      if (i >= this.derivers) {
        this.recorder.totals.apiFailed++
        this.apiDone(i, t, "Unavailable")
        return
      }
      this.recorder.count("failedPolls")
      this.finishPoll(i, "error", t, "unavailable")
      return
    }
    this.retries[i]!++
    this.generation[i]!++
    this.phase[i] = RETRY_SLEEP
    const wait = RetryBackoff.waitFrom(this.retry, this.retries[i]!, this.random())
    this.events.push(t + wait, RETRY_WAKE, i, this.generation[i]!)
  }

  // Backends and the database.

  /** Client `i` gets a backend and its query starts: a claim for a deriver, one query for an API request. */
  private grant(i: number, t: number): void {
    this.phase[i] = CLAIM
    this.active++
    if (i >= this.derivers) {
      this.database.add(t, i, this.params.api.queryMillis)
      return
    }
    this.recorder.count("claimStarts")
    if (this.claimStartTimes.length < this.recordClaims) this.claimStartTimes.push({ deriver: i, atMillis: t })
    this.jobToken[i] = this.database.add(t, i, this.params.database.claimMillis)
    const timeout = this.params.claimTimeoutMillis
    if (timeout > 0) this.events.push(t + timeout, CLAIM_TIMEOUT, i, this.generation[i]!)
  }

  /** The claim's statement timeout: the database cancels it and the error travels back through the pooler. */
  private claimTimedOut(i: number, t: number): void {
    this.database.cancel(t, this.jobToken[i]!)
    this.cancelled[i] = 1
    this.relay(i, t)
  }

  /** Hands free backends to the spike's queries first, then to waiting clients in arrival order. */
  private assignBackends(t: number): void {
    const ceiling = this.params.pooler.backendCeiling
    while (this.active < ceiling) {
      if (this.spikeHeld < this.spikeWanted) {
        this.spikeHeld++
        this.active++
        this.database.addExternal(t, 1)
        continue
      }
      if (this.waitingCount === 0) break
      this.waiting.shift()
      const i = this.waiting.shiftedValue
      if (!this.isCurrent(i, this.waiting.shiftedTag) || this.phase[i] !== WAITING) continue
      this.waitingCount--
      this.grant(i, t)
    }
  }

  /** A query finished; its result travels back through the pooler, and the backend is held until the relay is done. */
  private queryDone(t: number): void {
    this.relay(this.database.complete(t), t)
  }

  private relay(i: number, t: number): void {
    this.phase[i] = RELAY
    this.poolerQueue.push((i << 1) | JOB_RELAY, 0)
    this.dispatchPooler(t)
  }

  /** The relay is done: the backend and the client connection are free; the poll ends with its outcome. */
  private relayDone(i: number, t: number): void {
    this.active--
    this.clients--
    this.holdsSlot[i] = 0
    if (i >= this.derivers) {
      this.recorder.totals.apiServed++
      this.assignBackends(t)
      this.apiDone(i, t, "Answered")
      return
    }
    if (this.cancelled[i] === 1) {
      this.cancelled[i] = 0
      this.recorder.totals.claimsCancelled++
      this.assignBackends(t)
      this.finishPoll(i, "error", t, "cancelled")
      return
    }
    this.recorder.count("claimsCompleted")
    this.assignBackends(t)
    const work = this.params.work
    const signal = this.signalOf(t - this.pollStart[i]!)
    if (this.pendingWork[i]! > 0) {
      // the claim takes the tenant's work unit with every write's item in it
      this.pendingWork[i] = 0
      this.pickups.push(t - this.workSince[i]!)
      if (this.resendOutstanding[i] === 1) {
        this.resendOutstanding[i] = 0
        this.recorder.totals.resendsProcessed++
        this.recorder.totals.lastResendProcessedMillis = t
      }
      this.busyUntil[i] = t + work.handlerMillis
      this.finishPoll(i, "claimed", t, signal)
    } else if (work.probability > 0 && this.random() < work.probability) {
      this.busyUntil[i] = t + work.handlerMillis
      this.finishPoll(i, "claimed", t, signal)
    } else {
      this.finishPoll(i, "empty", t, signal)
    }
  }

  // The pooler's threads.

  /** Starts queued pooler jobs on free threads; a client that gave up before its handshake costs nothing. */
  private dispatchPooler(t: number): void {
    const pooler = this.params.pooler
    while (this.freeThreads.length > 0 && this.poolerQueue.shift()) {
      const job = this.poolerQueue.shiftedValue
      const tag = this.poolerQueue.shiftedTag
      const i = job >> 1
      const kind = job & 1
      if (kind === JOB_ATTEMPT && (!this.isCurrent(i, tag) || this.phase[i] !== ATTEMPT)) continue
      const thread = this.freeThreads.pop()!
      this.threadJob[thread] = job
      this.threadTag[thread] = tag
      const cost = kind === JOB_RELAY
        ? pooler.relayCostMillis
        : this.holdsSlot[i] === 1
        ? pooler.connectCostMillis
        : pooler.rejectCostMillis
      this.events.push(t + cost, POOLER_DONE, thread, 0)
    }
  }

  /** A pooler thread finished its job (a handshake or a relay) and takes the next one. */
  private poolerDone(thread: number, t: number): void {
    const job = this.threadJob[thread]!
    const tag = this.threadTag[thread]!
    this.freeThreads.push(thread)
    if ((job & 1) === JOB_ATTEMPT) this.attemptDone(job >> 1, tag, t)
    else this.relayDone(job >> 1, t)
    this.dispatchPooler(t)
  }

  // The spike: another workload's long queries take backends first.

  private spikeStart(t: number): void {
    this.spikeWanted = this.params.spike?.backends ?? 0
    this.assignBackends(t)
  }

  private spikeEnd(t: number): void {
    this.spikeWanted = 0
    this.database.addExternal(t, -this.spikeHeld)
    this.active -= this.spikeHeld
    this.spikeHeld = 0
    this.assignBackends(t)
  }
}
