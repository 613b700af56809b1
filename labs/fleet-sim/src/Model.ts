/**
 * The simulation's parameters: the fleet, its poll policy, how it acquires connections, the pooler, the
 * database and the trigger. Each field is documented and justified in the package README; `scenario` and
 * `policy` build the presets the CLI offers.
 *
 * @since 0.1.0
 */
import { Settings as AdmissionSettings } from "@resilience/admission"
import { DbConfig } from "@resilience/db-session"
import { DeriverConfig, type Overload, type Scheduling } from "@resilience/deriver"
import { PollBackoff } from "@resilience/jitter"
import { Duration, Effect } from "effect"
import type * as Gate from "./Gate.ts"
import * as RetryBackoff from "./RetryBackoff.ts"

/**
 * How a deriver acquires a connection for one poll: a single attempt bounded by a connect timeout (the fix),
 * or the removed retry loop.
 *
 * @since 0.1.0
 */
export type Acquisition =
  | { readonly kind: "failfast"; readonly connectTimeoutMillis: number }
  | { readonly kind: "retry"; readonly retry: RetryBackoff.Settings }

/**
 * The pooler (Supavisor or PgBouncer) between the fleet and Postgres.
 *
 * @since 0.1.0
 */
export interface Pooler {
  /** Client connections it accepts; the next attempt is rejected (EMAXCONN / max_client_conn). */
  readonly maxClientConnections: number
  /** Server connections (backends) it opens at most; clients beyond it wait for one, in order. */
  readonly backendCeiling: number
  /** Worker threads that process connection handshakes and transaction relays in arrival order. */
  readonly threads: number
  /** Pooler work for one connection attempt (TLS, startup, auth), accepted or rejected. */
  readonly connectCostMillis: number
  /** Pooler work to refuse one connection attempt beyond the client limit (TLS and startup, then EMAXCONN). */
  readonly rejectCostMillis: number
  /** Pooler work to relay one claim transaction and hand its backend back; the backend is held until then. */
  readonly relayCostMillis: number
  /** How long an accepted client may wait for a backend before the pooler drops it (query_wait_timeout). */
  readonly queueTimeoutMillis: number
}

/**
 * The database behind the pooler.
 *
 * @since 0.1.0
 */
export interface Database {
  /** Queries that run at full speed at once; beyond it they share (processor sharing). */
  readonly cores: number
  /** Service time of one claim query with the database not oversubscribed. */
  readonly claimMillis: number
  /** Extra slowdown per oversubscribed core-equivalent (0 = pure processor sharing). */
  readonly contention: number
}

/**
 * Work in the tenants' queues: the chance that a claim finds a unit, and how long its handler runs off the
 * database (the deriver has one worker).
 *
 * @since 0.1.0
 */
export interface Work {
  readonly probability: number
  readonly handlerMillis: number
}

/**
 * Open-loop API traffic through the same pooler and database: requests arrive (Poisson) whether or not the
 * database keeps up, each acquires a connection with the fleet's acquisition policy and runs one query.
 *
 * @since 0.1.0
 */
export interface Api {
  readonly requestsPerSecond: number
  readonly queryMillis: number
}

/**
 * The API's admission gate (the `adaptive` policy): one gate per API instance, requests spread over the
 * instances in turn.
 *
 * @since 0.2.0
 */
export interface Admission {
  readonly instances: number
  readonly gate: Gate.Settings
}

/**
 * A load spike: `backends` long queries from another workload (a batch job, an API burst) hold backends and
 * cores from `atSeconds` for `seconds`.
 *
 * @since 0.1.0
 */
export interface Spike {
  readonly atSeconds: number
  readonly seconds: number
  readonly backends: number
}

/**
 * The wake path (issue #35): an API write that commits tells its tenant's deriver, which polls now. Each
 * deriver's wakes are decided by `@resilience/wake`'s `Coalesce`, as the deriver's loop decides them: a wake
 * while its poll is in flight is coalesced into at most one more poll after it; a woken poll starts no sooner
 * than `minIntervalMillis` after the last poll started; it resets the schedule to the base interval (the write
 * is evidence that the database answered), and if it fails anyway the schedule is restored and wakes are
 * ignored until a poll succeeds; a wake does not cut short an overload floor (the floor's own sleep stands).
 * A write gives its tenant one unit of work, claimed by the next poll of its deriver, with the wake on or
 * off, so both runs carry the same work.
 *
 * @since 0.3.0
 */
export interface Wake {
  /** Whether a write wakes its tenant's deriver (off: the write's work waits for the deriver's next poll). */
  readonly enabled: boolean
  /**
   * The share of the open-loop API requests that are writes (each for a tenant drawn uniformly); 0: none (no
   * draw is made: the run is the model without writes).
   */
  readonly writeFraction: number
  /** From the API's answer to the deriver's wake (the HTTP hop). */
  readonly delayMillis: number
  /**
   * The least time from one poll's start to a woken poll's start (`DERIVER_WAKE_MIN_INTERVAL_SECONDS`; the
   * deriver's default in {@link noWake}).
   */
  readonly minIntervalMillis: number
  /**
   * A candidate the deriver does not run (absent or 0: the deriver's wake): a woken poll whose deriver's last
   * poll failed waits a delay drawn uniformly in `[0, spreadAfterFailureMillis)` (`Jitter.startupDelayFrom`),
   * so that a fleet-wide wave of writes after an outage does not wake every deriver at once.
   */
  readonly spreadAfterFailureMillis?: number | undefined
}

/**
 * A restart of the database: from `atSeconds` for `seconds` every connection attempt is refused (the pooler
 * answers, the server does not); queries already running finish. When it is back, every tenant's API gets a
 * resent write from its clients (the API's first 201 after the restart), at a time drawn uniformly in
 * `resendWindowMillis` after the restart ends (api-client's full-jitter retry at its 30 s cap).
 *
 * @since 0.3.0
 */
export interface Outage {
  readonly atSeconds: number
  readonly seconds: number
  readonly resendWindowMillis: number
}

/**
 * How the fleet starts: `aligned` — every deriver starts at t = 0 (a rollout batch, a database restart) and
 * takes its own startup delay; `spread` — a fleet that has run for a while with empty queues: every backoff
 * at its cap, phases uniform over one max interval.
 *
 * @since 0.1.0
 */
export type Start = "aligned" | "spread"

/**
 * Everything one run needs.
 *
 * @since 0.1.0
 */
export interface Params {
  readonly derivers: number
  readonly horizonSeconds: number
  readonly seed: string
  readonly start: Start
  /** The deriver's poll backoff (validated by `@resilience/jitter`). */
  readonly poll: PollBackoff.Settings
  /** Upper bound of the startup delay (0 = none). */
  readonly startupJitterMillis: number
  /** Where each deriver's schedule starts after its startup delay (`DERIVER_POLLING_INITIAL_INTERVAL`). */
  readonly initialInterval: Scheduling.InitialInterval
  readonly acquisition: Acquisition
  /** The deriver's overload signals (`DERIVER_OVERLOAD_*`; the `adaptive` policy), or none. */
  readonly overload: Overload.Settings | undefined
  /** The claim's statement timeout: a claim still running after it is cancelled (0 = none). */
  readonly claimTimeoutMillis: number
  /** The API's admission gate (the `adaptive` policy), or none. */
  readonly admission: Admission | undefined
  readonly pooler: Pooler
  readonly database: Database
  readonly work: Work
  readonly api: Api
  readonly spike: Spike | undefined
  /** The wake path (absent: no writes, no wakes; the model before 0.3.0). */
  readonly wake?: Wake | undefined
  /** A restart of the database (the `outage` scenario), or none. */
  readonly outage?: Outage | undefined
}

/**
 * The scenarios: `restart` (the fleet starts aligned at t = 0), `incident` (`restart` with the spec's
 * figures over 4 hours), `spike` (a spread fleet hit by a load spike), `outage` (a spread fleet of the spec's
 * size through a 120 s restart of the database, every tenant's API resending a write when it is back).
 *
 * @since 0.1.0
 */
export type Scenario = "restart" | "incident" | "spike" | "outage"

/**
 * @since 0.1.0
 */
export const scenarios: ReadonlyArray<Scenario> = ["restart", "incident", "spike", "outage"]

/**
 * The policies: `baseline` (no jitter, retry: the code of the incident), `jitter-only`, `failfast-only`,
 * `fixed` (both changes), `adaptive` (the fix, the deriver's overload signals and the API's admission gate).
 *
 * @since 0.1.0
 */
export type Policy = "baseline" | "jitter-only" | "failfast-only" | "fixed" | "adaptive"

/**
 * @since 0.1.0
 */
export const policies: ReadonlyArray<Policy> = ["baseline", "jitter-only", "failfast-only", "fixed", "adaptive"]

/**
 * The fix's jitter ratio (DERIVER_POLLING_JITTER_RATIO default).
 *
 * @since 0.1.0
 */
export const fixedJitterRatio: number = PollBackoff.defaults.ratio

/**
 * The claim's statement timeout under the `adaptive` policy: db-session's statement timeout default
 * (`DB_STATEMENT_TIMEOUT_SECONDS` = 30), which every statement, the claim included, runs under.
 *
 * @since 0.2.0
 */
export const claimTimeoutMillis: number = Duration.toMillis(DbConfig.defaults.statementTimeout)

/**
 * The fix's connect timeout (DB_CONNECT_TIMEOUT_SECONDS default).
 *
 * @since 0.1.0
 */
export const fixedConnectTimeoutMillis: number = Duration.toMillis(DbConfig.defaults.connectTimeout)

/**
 * API instances behind the pooler, each with its own admission gate (the `adaptive` policy).
 *
 * @since 0.2.0
 */
export const apiInstances = 10

/**
 * The deriver's overload settings for a poll schedule, with the deriver's own defaults and validation
 * (`DeriverConfig.make`: the overload cap defaults to ten times the idle cap).
 *
 * @since 0.2.0
 */
export const overloadSettings = (
  poll: PollBackoff.Settings,
  input: DeriverConfig.Input = {}
): Effect.Effect<Overload.Settings, DeriverConfig.Invalid> =>
  Effect.map(
    DeriverConfig.make({
      pollingSleepIntervalSeconds: poll.baseMillis / 1000,
      pollingSleepMaxIntervalSeconds: poll.maxMillis / 1000,
      pollingBackoffMultiplier: poll.multiplier,
      pollingBackoffEnabled: poll.enabled,
      pollingJitterRatio: poll.ratio,
      ...input
    }),
    (config) => config.overload
  )

/**
 * {@link overloadSettings} with the deriver's defaults, for a valid schedule.
 *
 * @since 0.2.0
 */
export const overloadFor = (poll: PollBackoff.Settings): Overload.Settings => Effect.runSync(overloadSettings(poll))

/**
 * The spec's incident figures and the model's calibrated defaults (README: "Parameters").
 *
 * @since 0.1.0
 */
export const incident = {
  derivers: 11_543,
  horizonSeconds: 4 * 3600,
  // the production schedule (jitter's defaults), unjittered: the policies add the jitter
  poll: {
    baseMillis: Duration.toMillis(PollBackoff.defaults.base),
    multiplier: PollBackoff.defaults.multiplier,
    maxMillis: Duration.toMillis(PollBackoff.defaults.max),
    enabled: PollBackoff.defaults.enabled,
    ratio: 0
  },
  pooler: {
    maxClientConnections: 9_000,
    backendCeiling: 368,
    threads: 1,
    connectCostMillis: 1,
    rejectCostMillis: 1,
    relayCostMillis: 0.25,
    queueTimeoutMillis: 120_000
  },
  database: { cores: 96, claimMillis: 170, contention: 0 },
  work: { probability: 0, handlerMillis: 0 },
  api: { requestsPerSecond: 200, queryMillis: 20 },
  spike: { atSeconds: 300, seconds: 30, backends: 368 },
  outage: { atSeconds: 300, seconds: 120, resendWindowMillis: 30_000 }
} as const

/**
 * The wake path as the presets have it: off, no writes (the model without it). `--wake 1 --write-fraction f`
 * turns it on; the `outage` scenario's resent writes are writes whatever the fraction.
 *
 * @since 0.3.0
 */
export const noWake: Wake = {
  enabled: false,
  writeFraction: 0,
  delayMillis: 1,
  minIntervalMillis: DeriverConfig.defaults.wakeMinIntervalSeconds * 1000
}

/**
 * The policy's part of the parameters: jitter ratio, startup jitter and acquisition.
 *
 * @since 0.1.0
 */
export const policy = (
  name: Policy,
  poll: PollBackoff.Settings,
  retry: RetryBackoff.Settings = RetryBackoff.reference,
  connectTimeoutMillis: number = fixedConnectTimeoutMillis
): Pick<
  Params,
  "poll" | "startupJitterMillis" | "acquisition" | "overload" | "claimTimeoutMillis" | "admission"
> => {
  const adaptive = name === "adaptive"
  const jitter = name === "jitter-only" || name === "fixed" || adaptive
  const failfast = name === "failfast-only" || name === "fixed" || adaptive
  const jittered = { ...poll, ratio: jitter ? fixedJitterRatio : 0 }
  return {
    poll: jittered,
    startupJitterMillis: jitter ? poll.maxMillis : 0,
    acquisition: failfast ? { kind: "failfast", connectTimeoutMillis } : { kind: "retry", retry },
    overload: adaptive ? overloadFor(jittered) : undefined,
    claimTimeoutMillis: adaptive ? claimTimeoutMillis : 0,
    admission: adaptive ? { instances: apiInstances, gate: AdmissionSettings.defaults } : undefined
  }
}

/**
 * The parameters of a scenario under a policy, before any command-line override.
 *
 * @since 0.1.0
 */
export const preset = (scenario: Scenario, name: Policy, seed = "1"): Params => ({
  derivers: scenario === "restart" ? 2_000 : incident.derivers,
  horizonSeconds: scenario === "incident" ? incident.horizonSeconds : scenario === "outage" ? 900 : 1_800,
  seed,
  start: scenario === "spike" || scenario === "outage" ? "spread" : "aligned",
  ...policy(name, incident.poll),
  initialInterval: "base",
  pooler: incident.pooler,
  database: incident.database,
  work: incident.work,
  api: incident.api,
  spike: scenario === "spike" ? incident.spike : undefined,
  wake: noWake,
  outage: scenario === "outage" ? incident.outage : undefined
})

/**
 * When the trigger ends, in seconds: the instant of the restart (t = 0), the end of the spike or of the
 * database's outage.
 *
 * @since 0.1.0
 */
export const triggerEndSeconds = (params: Params): number =>
  params.outage !== undefined
    ? params.outage.atSeconds + params.outage.seconds
    : params.spike === undefined
    ? 0
    : params.spike.atSeconds + params.spike.seconds

/**
 * The same system at `1/factor` of its size: fleet, client limit, backends, cores and API rate divided by
 * `factor` (API instances too, at least one), the pooler's per-operation costs multiplied by it (so its capacity shrinks in step). Every
 * time constant (claim cost, poll schedule, retry waits, timeouts) is unchanged, so the scaled system has the
 * same utilizations and the same dynamics in miniature; tests use it to stay fast.
 *
 * @since 0.1.0
 */
export const scaled = (params: Params, factor: number): Params => ({
  ...params,
  derivers: Math.round(params.derivers / factor),
  pooler: {
    ...params.pooler,
    maxClientConnections: Math.round(params.pooler.maxClientConnections / factor),
    backendCeiling: Math.round(params.pooler.backendCeiling / factor),
    connectCostMillis: params.pooler.connectCostMillis * factor,
    rejectCostMillis: params.pooler.rejectCostMillis * factor,
    relayCostMillis: params.pooler.relayCostMillis * factor
  },
  database: { ...params.database, cores: params.database.cores / factor },
  api: { ...params.api, requestsPerSecond: params.api.requestsPerSecond / factor },
  admission: params.admission === undefined
    ? undefined
    : { ...params.admission, instances: Math.max(1, Math.round(params.admission.instances / factor)) },
  spike: params.spike === undefined
    ? undefined
    : { ...params.spike, backends: Math.round(params.spike.backends / factor) }
})
