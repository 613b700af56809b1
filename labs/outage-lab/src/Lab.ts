/**
 * One lab run: start the real parts, create the fleet's schemas, then at t = 0 start the sampler, the fleet
 * and the API traffic; fire the trigger at `trigger-at`; stop everything at the horizon (the run is also cut
 * off by a hard deadline a minute later, whatever happens), and tear the parts down. The result has the
 * per-second series and the simulator's summary of them, plus what only the lab measures.
 */
import { Checker, History } from "@resilience/checker"
import { type DbError, DbSession } from "@resilience/db-session"
import { type Simulation, Summary } from "@resilience/fleet-sim"
import type { ServerStartFailed } from "@resilience/local-postgres"
import type { InvalidParameter } from "@resilience/parameters"
import type { PgBouncer } from "@resilience/test-db"
import { Clock, Duration, Effect, Exit, Fiber, Scope } from "effect"
import * as Counters from "./Counters.ts"
import * as Fleet from "./Fleet.ts"
import * as LabSeries from "./LabSeries.ts"
import * as Pooler from "./Pooler.ts"
import * as Sampler from "./Sampler.ts"
import { schemaCount, type Settings, triggerEndSeconds } from "./Settings.ts"
import * as SimParams from "./SimParams.ts"
import * as Traffic from "./Traffic.ts"

/** The figures only the lab has, beside the simulator's summary. */
export interface LabFigures {
  /** Seconds in which clients reached `max_client_conn` or someone was refused at it. */
  readonly secondsAtClientLimit: number
  /** Peak clients waiting for a server connection. */
  readonly peakClientsWaiting: number
  /**
   * Seconds from the trigger's end to the first second with no client waiting for a server and no refusal:
   * when the staircase has drained (`null`: not within the horizon). The summary's `recoverySeconds` is the
   * simulator's stricter "back under the backend ceiling for good".
   */
  readonly drainedSeconds: number | null
  /**
   * Seconds from the trigger's end until client connections are back at or under their pre-trigger peak (the
   * highest second in the half before the trigger, after the fleet's own start) for good; `null`: still above
   * it at the horizon. The simulator's rule (back under the backend ceiling) is too strict for a small pool,
   * whose ordinary Poisson peaks touch the ceiling.
   */
  readonly settledSeconds: number | null
  /** The pre-trigger peak of client connections that {@link settledSeconds} compares with. */
  readonly preTriggerPeakClients: number
  /** Seconds after the trigger's end in which clients reached `max_client_conn` or someone was refused. */
  readonly secondsAtClientLimitAfter: number
  readonly apiArrived: number
  readonly apiServed: number
  readonly apiFailed: number
  /** Failures by `role:phase:kind`. */
  readonly failures: Readonly<Record<string, number>>
  /** The pooler's CPU seconds over the run (PgBouncer, and stunnel in front of it). */
  readonly poolerCpuSeconds: number
  /** Samples per second actually achieved (nominal 10). */
  readonly sampleRate: number
  /** With `--writes`: the consistency checker's verdict on the API's appends (`null`: no writes). */
  readonly consistency: Checker.Verdict | null
}

/** A finished run. */
export interface Result {
  readonly settings: Settings
  /** The processes the run started; all gone when it returns. */
  readonly pids: { readonly postgres: number; readonly pgbouncer: number; readonly stunnel: number | null }
  readonly series: Simulation.Series
  readonly extra: LabSeries.Extra
  readonly summary: Summary.Summary
  readonly lab: LabFigures
}

/**
 * Seconds from `end` until `clients` stay at or under `threshold` to the end of the series (0: never above it
 * after `end`); `null` if still above it in the last second.
 */
export const settledAfter = (clients: ArrayLike<number>, threshold: number, end: number): number | null => {
  let lastAbove = -1
  for (let s = end; s < clients.length; s++) if (clients[s]! > threshold) lastAbove = s
  return lastAbove < 0 ? 0 : lastAbove === clients.length - 1 ? null : lastAbove + 1 - end
}

/** Seconds past the horizon after which a run is cut off even if its teardown hangs. */
export const hardDeadlineSeconds = 60

/**
 * With `--writes`, after the horizon: waits (at most 60 s, the fleet still running) for the appends' queue items,
 * then reconciles the history with schema 0, straight on the cluster; logs the table.
 */
const check = (clusterUrl: string, history: History.History, log: (line: string) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const schema = Fleet.schemaOf(0)
    const left = yield* Checker.settle(schema, history, "60 seconds")
    const verdict = yield* Checker.reconcile(schema, history)
    yield* log(`consistency (backlog left after waiting: ${left}):\n${Checker.table(verdict)}`)
    return verdict
  }).pipe(Effect.provide(DbSession.layer({
    url: clusterUrl,
    connectTimeout: "10 seconds",
    poolClass: "queue",
    poolSize: 1,
    driver: "pg",
    applicationName: "lab-checker"
  })))

/** The run's TLS in words. */
export const tlsText = (settings: Pick<Settings, "tls" | "tlsKey">): string =>
  settings.tls === "none"
    ? "none"
    : settings.tls === "pgbouncer"
    ? `PgBouncer client_tls (${settings.tlsKey})`
    : `stunnel in front (${settings.tlsKey})`

/** Runs the lab once. `log` gets progress lines. */
export const run = (
  settings: Settings,
  log: (line: string) => Effect.Effect<void> = () => Effect.void
): Effect.Effect<
  Result,
  Error | ServerStartFailed | PgBouncer.PgBouncerUnavailable | DbError | InvalidParameter.InvalidParameter
> =>
  Effect.scoped(Effect.gen(function*() {
    const parts = yield* Pooler.start(settings)
    const pids = { postgres: parts.cluster.pid, pgbouncer: parts.bouncer.pid, stunnel: parts.poolerPids[1] ?? null }
    yield* log(
      `PostgreSQL ${parts.cluster.port} (max_connections ${settings.maxConnections}), PgBouncer ${parts.bouncer.port} ` +
        `(transaction mode, max_client_conn ${settings.maxClientConn}, default_pool_size ${settings.poolSize}, ` +
        `auth ${settings.auth}, TLS ${tlsText(settings)}${
          settings.poolerCpu >= 0 ? `, pinned to CPU ${settings.poolerCpu}` : ""
        }); creating ${schemaCount(settings)} schemas${
          settings.history > 0 ? ` with ${settings.history} processed rows each` : ""
        }…`
    )
    yield* Fleet.prepare(parts.cluster.url, settings)
    const admin = yield* Pooler.client(parts.adminUrl, "lab-admin")
    const direct = yield* Pooler.client(parts.cluster.url, "lab-sampler")
    const counters = Counters.make()
    const samples: Array<Sampler.Sample> = []
    const startedAtMillis = yield* Clock.currentTimeMillis
    const scope = yield* Effect.scope
    const sampler = yield* Effect.forkIn(
      Sampler.run({
        admin,
        direct,
        poolerPids: parts.poolerPids,
        counters,
        startedAtMillis,
        periodMillis: 100,
        into: samples
      }),
      scope
    )
    yield* log(`t=0: ${settings.derivers} derivers (${settings.policy}) and ${settings.apiRps} API requests/s start`)
    const fleetScope = yield* Scope.fork(scope)
    const fleet = yield* Fleet.start(settings, parts.url, counters).pipe(Scope.provide(fleetScope))
    const history = History.make()
    const traffic = yield* Effect.forkIn(Traffic.run(settings, parts.url, counters, history), scope)
    const sleepUntil = (second: number) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) => Effect.sleep(Duration.millis(Math.max(0, startedAtMillis + second * 1000 - now)))
      )
    yield* sleepUntil(settings.triggerAtSeconds)
    if (settings.trigger === "stall") {
      yield* log(
        `t=${settings.triggerAtSeconds}: stall: ${settings.poolSize} statements hold every pooled backend for ${settings.stallSeconds} s`
      )
      yield* Effect.forkIn(
        Effect.forEach(
          Array.from({ length: settings.poolSize }),
          () =>
            Effect.scoped(Effect.flatMap(Pooler.client(parts.url, "lab-stall"), (c) =>
              Effect.promise(() =>
                c.query(`SELECT pg_sleep(${settings.stallSeconds})`).catch(() => undefined)
              ))),
          { concurrency: "unbounded", discard: true }
        ).pipe(Effect.ignore),
        scope
      )
    } else {
      yield* log(`t=${settings.triggerAtSeconds}: mass restart of ${settings.derivers} derivers`)
      yield* fleet.restart
    }
    yield* sleepUntil(triggerEndSeconds(settings))
    yield* log(`t=${triggerEndSeconds(settings)}: trigger over; observing until ${settings.horizonSeconds} s`)
    yield* sleepUntil(settings.horizonSeconds)
    yield* Fiber.interrupt(sampler)
    yield* Fiber.interrupt(traffic)
    // claims cut short by their timeout up to the horizon (stopping the fleet interrupts the ones in flight)
    const cancelled = counters.cancelled
    const consistency = settings.writes ? yield* check(parts.cluster.url, history, log) : null
    yield* Scope.close(fleetScope, Exit.void)
    const { series, extra } = LabSeries.build(samples, settings.horizonSeconds)
    const params = yield* SimParams.of(settings, {
      connectCostMillis: 0,
      rejectCostMillis: 0,
      relayCostMillis: 0,
      claimMillis: 1
    }, true)
    const summary = Summary.summarize({
      params,
      series,
      totals: {
        polls: Counters.total(counters.polls),
        claimStarts: Counters.total(counters.polls, (k) =>
          k === "claimed" || k === "empty"),
        claimsCompleted: Counters.total(counters.polls, (k) => k === "claimed" || k === "empty"),
        connectionAttempts: counters.attempts.api + counters.attempts.deriver,
        rejections: counters.refusals,
        timeouts: counters.timeouts,
        failedPolls: counters.polls.get("error") ?? 0,
        claimsCancelled: cancelled,
        apiRequests: counters.apiArrived,
        apiServed: counters.apiServed,
        apiFailed: counters.apiFailed,
        apiShed: 0,
        apiDropped: 0,
        events: samples.length
      },
      claimStartTimes: [],
      wallMillis: (yield* Clock.currentTimeMillis) - startedAtMillis
    })
    const end = Math.ceil(triggerEndSeconds(settings))
    let atLimit = 0
    let atLimitAfter = 0
    for (let s = 0; s < settings.horizonSeconds; s++) {
      if (extra.clientsTotal[s]! >= settings.maxClientConn || series.rejections[s]! > 0) {
        atLimit++
        if (s >= end) atLimitAfter++
      }
    }
    const trigger = Math.floor(settings.triggerAtSeconds)
    const preTriggerPeak = Math.max(0, ...series.clientConnections.slice(Math.floor(trigger / 2), trigger))

    let drained: number | null = null
    for (let s = end; s < settings.horizonSeconds && drained === null; s++) {
      if (extra.clientsWaiting[s] === 0 && series.rejections[s] === 0) drained = s - end
    }
    const lab: LabFigures = {
      secondsAtClientLimit: atLimit,
      secondsAtClientLimitAfter: atLimitAfter,
      drainedSeconds: drained,
      settledSeconds: settledAfter(series.clientConnections, preTriggerPeak, end),
      preTriggerPeakClients: preTriggerPeak,
      peakClientsWaiting: Math.max(0, ...extra.clientsWaiting),
      apiArrived: counters.apiArrived,
      apiServed: counters.apiServed,
      apiFailed: counters.apiFailed,
      failures: Object.fromEntries([...counters.failures].sort()),
      poolerCpuSeconds: samples.length < 2 ? 0 : samples.at(-1)!.poolerCpuSeconds - samples[0]!.poolerCpuSeconds,
      sampleRate: samples.length / settings.horizonSeconds,
      consistency
    }
    yield* log(`t=${settings.horizonSeconds}: done; stopping the fleet, PgBouncer and PostgreSQL`)
    return { settings, pids, series, extra, summary, lab } satisfies Result
  })).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(settings.horizonSeconds + hardDeadlineSeconds + 120),
      orElse: () => Effect.die(new Error("the lab run overran its hard deadline"))
    })
  )
