/**
 * The deriver's settings, read from the environment (`DERIVER_*`, docs/configuration.md) with Effect `Config`. An
 * invalid value fails at start with a message that names the variable, the value and the allowed range.
 *
 * @since 0.1.0
 */
import { PollBackoff } from "@resilience/jitter"
import { InvalidParameter, Parameters } from "@resilience/parameters"
import { Config, Duration, Effect, Schema } from "effect"
import type * as Overload from "./Overload.ts"
import type * as Scheduling from "./Scheduling.ts"

/**
 * Validated settings of one deriver (all durations in milliseconds).
 *
 * @since 0.1.0
 * @category models
 */
export interface DeriverConfig {
  /** Concurrent work units (`DERIVER_WORKERS`). */
  readonly workers: number
  /**
   * The poll backoff: base, multiplier, max, enabled, jitter ratio. Its base is also the sleep while every
   * worker is busy (the spec's base-interval sleep; a freed worker ends it early).
   */
  readonly backoff: PollBackoff.Settings
  /**
   * How a worker backs off a database that fails its checkouts (jittered, ×multiplier, capped; always on,
   * whatever the poll's `enabled`). Derived: {@link derived}.
   */
  readonly workerBackoff: PollBackoff.Settings
  /**
   * The checkout gate's limit holds and circuit windows (`CheckoutGate.policy`). Derived: {@link derived}.
   */
  readonly gateBackoff: PollBackoff.Settings
  /**
   * While a slow handler runs, the items its unit finished before it are recorded after this long (so a
   * stop loses no finished work). Derived: {@link derived}.
   */
  readonly recordFlushMillis: number
  /** Where the schedule starts after the startup delay (`DERIVER_POLLING_INITIAL_INTERVAL`). */
  readonly initialInterval: Scheduling.InitialInterval
  /** Upper bound of the startup delay (`DERIVER_POLLING_STARTUP_JITTER_SECONDS`; 0 disables it). */
  readonly startupJitterMillis: number
  /** An ownership row without heartbeat for this long is stale (`DERIVER_STALE_SESSION_TIMEOUT_MINUTES`). */
  readonly staleTimeoutMillis: number
  /** Nominal time between stale cleanups, jittered (`DERIVER_STALE_WORK_UNIT_CLEANUP_INTERVAL_SECONDS`). */
  readonly cleanupIntervalMillis: number
  /** How long in-flight units may run after a shutdown signal (`DERIVER_SHUTDOWN_GRACE_SECONDS`). */
  readonly shutdownGraceMillis: number
  /** Items fetched per round trip while draining a unit (`DERIVER_BATCH_SIZE`). */
  readonly batchSize: number
  /**
   * Units claimed beyond the workers (`DERIVER_PREFETCH`; default: 8 × {@link workers}, at most 1,000). Each is held
   * by a fiber of its own and waits for one of the `workers` handler slots; while one unit's record is on its way to
   * the database, another unit's handler runs, and the records of all the units that finished meanwhile go out in one
   * statement, which claims as many next units: the more units in flight, the fewer statements per unit (a claim's
   * walk costs about the same for 10 units as for 30). 0: claim only for free workers, each waiting for its own
   * record (the behaviour before 0.3.0).
   */
  readonly prefetch: number
  /**
   * Whether a worker that releases its unit claims its next one in the same statement (`PollLoop`
   * `claimAlong`; `Queue.recordUnits`, whose one statement records the units of every worker that finished
   * meanwhile and claims as many next units). Not an environment variable: on for every worker count since 0.3.0
   * (docs/results/deriver-throughput.md, "Records of many units"); a library user may replace it.
   */
  readonly claimAlong: boolean
  /**
   * Overload-aware polling (`DERIVER_OVERLOAD_*`; the multiplier is the backoff's). Without an overload
   * signal it changes nothing.
   */
  readonly overload: Overload.Settings
  /**
   * Whether the overload signals and the process's checkout gate act (`DERIVER_OVERLOAD_ENABLED`, default
   * true). False: the spec's fix alone, the poll carries no overload signal and the gate never lowers its
   * limit (it stays a fixed cap of workers + 1 concurrent checkouts).
   */
  readonly overloadEnabled: boolean
  /**
   * Processed items older than this are deleted by the maintenance that runs with the stale cleanup
   * (`DERIVER_HISTORY_RETENTION_HOURS`), in small batches.
   */
  readonly historyRetentionMillis: number
  /**
   * Client-side deadline of one poll's checkout plus claim (`DERIVER_CLAIM_TIMEOUT_SECONDS`): a claim cut
   * short by it is interrupted (its statement cancelled on the server) and counts as an overload signal.
   */
  readonly claimTimeoutMillis: number
  /**
   * The least time from one poll's start to the start of a poll a wake makes (`DERIVER_WAKE_MIN_INTERVAL_SECONDS`,
   * `PollLoop` `wakeMinIntervalMillis`): the bound on the polls a flood of wakes can cause.
   */
  readonly wakeMinIntervalMillis: number
}

/**
 * Settings as a caller gives them: every field optional (production defaults), durations in seconds
 * (minutes for the stale timeout) as in the environment.
 *
 * @since 0.1.0
 * @category models
 */
export type Input = {
  readonly [K in keyof typeof settings]?: Kinds[(typeof settings)[K]] | undefined
}

/** What a setting's kind reads as, from the environment and in {@link Input}. */
interface Kinds {
  readonly number: number
  readonly boolean: boolean
  readonly string: string
}

/**
 * Every setting a caller may give, once, with its kind: {@link Input} and {@link Names} (its fields), and
 * {@link config} (what it reads) follow from this table; {@link defaults} gives the values, {@link make} the ranges
 * and the rules between settings.
 */
const settings = {
  workers: "number",
  pollingSleepIntervalSeconds: "number",
  pollingSleepMaxIntervalSeconds: "number",
  pollingBackoffMultiplier: "number",
  pollingBackoffEnabled: "boolean",
  pollingJitterRatio: "number",
  /** `base` (default) or `max`. */
  pollingInitialInterval: "string",
  /** Default: the max interval. */
  pollingStartupJitterSeconds: "number",
  staleSessionTimeoutMinutes: "number",
  staleWorkUnitCleanupIntervalSeconds: "number",
  shutdownGraceSeconds: "number",
  batchSize: "number",
  /** Default: twice {@link DeriverConfig.workers}. */
  prefetch: "number",
  overloadSlowPollSeconds: "number",
  /** Default: ten times the max interval. */
  overloadMaxIntervalSeconds: "number",
  /** Default: the max interval. */
  overloadRecoverySeconds: "number",
  overloadEnabled: "boolean",
  historyRetentionHours: "number",
  claimTimeoutSeconds: "number",
  wakeMinIntervalSeconds: "number"
} as const satisfies Record<string, keyof Kinds>

/**
 * The name each {@link Input} field is read from by {@link config} and reported under by {@link make}: the
 * application chooses them (this repository's deriver passes `DERIVER_*` from `@resilience/environment`).
 *
 * @since 0.2.0
 * @category models
 */
export type Names = { readonly [K in keyof Input]-?: string }

/** Each field named by itself: what {@link make}'s errors say when the caller gives no names. */
const fieldNames: Names = new Proxy({} as Names, { get: (_target, field) => String(field) })

/**
 * The production defaults (the README's configuration table).
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaults = {
  workers: 1,
  // the poll schedule's defaults are jitter's (PollBackoff.defaults: 1 s → ×2 → 30 s, ratio 0.5), written once
  pollingSleepIntervalSeconds: Duration.toSeconds(PollBackoff.defaults.base),
  pollingSleepMaxIntervalSeconds: Duration.toSeconds(PollBackoff.defaults.max),
  pollingBackoffMultiplier: PollBackoff.defaults.multiplier,
  pollingBackoffEnabled: PollBackoff.defaults.enabled,
  pollingJitterRatio: PollBackoff.defaults.ratio,
  pollingInitialInterval: "base",
  staleSessionTimeoutMinutes: 5,
  staleWorkUnitCleanupIntervalSeconds: 60,
  shutdownGraceSeconds: 10,
  batchSize: 20,
  overloadSlowPollSeconds: 2,
  overloadEnabled: true,
  historyRetentionHours: 168,
  claimTimeoutSeconds: 10,
  wakeMinIntervalSeconds: 0.05
} as const

/**
 * The most workers for which {@link DeriverConfig.claimAlong} was on in 0.2.0 (2: one unit's claim along per record
 * made 8 workers slower). Since 0.3.0 a record statement carries the units of every worker that finished meanwhile
 * (`Queue.recordUnits`) and claims along for all of them at once, which made 8 workers faster, so claiming along is
 * on for every worker count and this is no longer read.
 *
 * @deprecated Since 0.3.0: claiming along is on for every worker count; this goes in 0.4.0.
 * @since 0.2.0
 * @category constants
 */
export const claimAlongMaxWorkers: number = Number.POSITIVE_INFINITY

/**
 * The settings derived from the poll schedule, in this one place (issue #22: each setting means one thing).
 * Today's values, all taken from the poll backoff because each is a back-off against the same database on the
 * same spec schedule:
 * - `workerBackoff`: the poll backoff, always enabled (a worker must not hot-loop a refusing database even
 *   when `DERIVER_POLLING_BACKOFF_ENABLED=false` keeps the poll at its base);
 * - `gateBackoff`: the same, for the checkout gate's holds and circuit windows (so the process's attempts
 *   during an outage follow the spec's 1 → 2 → … → cap schedule);
 * - `recordFlushMillis`: the base interval.
 * They are fields of {@link DeriverConfig}, not environment variables: a library user who needs other values
 * replaces them in the validated settings (`{ ...config, recordFlushMillis: 500 }`).
 *
 * @since 0.2.0
 * @category decisions
 */
export const derived = (
  backoff: PollBackoff.Settings
): Pick<DeriverConfig, "workerBackoff" | "gateBackoff" | "recordFlushMillis"> => ({
  workerBackoff: { ...backoff, enabled: true },
  gateBackoff: { ...backoff, enabled: true },
  recordFlushMillis: backoff.baseMillis
})

/**
 * A setting outside its allowed range, named as the caller names it (its environment variable, or its field).
 *
 * @since 0.1.0
 * @category models
 */
export type Invalid = InvalidParameter.InvalidParameter

const invalid = (parameter: string, value: unknown, allowed: string) =>
  new InvalidParameter.InvalidParameter({ parameter, value, allowed })

// Range checks are `@resilience/parameters`' (`Parameters.check` and its schemas); values are checked in the
// environment's units.
const positiveInteger = Parameters.check(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)), "an integer >= 1")
/** Units claimed beyond the workers by default, per worker (issue #47: docs/results/job-queue-harness.md). */
const prefetchPerWorker = 8
/** The most units claimed beyond the workers (the default stops there too). */
const maxPrefetch = 1000
const prefetchRange = Parameters.check(
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0), Schema.isLessThanOrEqualTo(maxPrefetch)),
  `an integer from 0 to ${maxPrefetch}`
)
const positiveSeconds = (value: number, parameter: string) =>
  Effect.map(Parameters.check(Parameters.PositiveMillis, "a finite number of seconds > 0")(value, parameter), toMillis)
const nonNegativeSeconds = (value: number, parameter: string) =>
  Effect.map(
    Parameters.check(Parameters.NonNegativeMillis, "a finite number of seconds >= 0")(value, parameter),
    toMillis
  )
const positiveMinutes = Parameters.check(Parameters.PositiveMillis, "a finite number of minutes > 0")
const positiveHours = Parameters.check(Parameters.PositiveMillis, "a finite number of hours > 0")
const toMillis = (seconds: number) => seconds * 1000

/** The settings with a numeric default. */
type NumericSetting = { [K in keyof typeof defaults]: (typeof defaults)[K] extends number ? K : never }[
  keyof typeof defaults
]

/** A numeric setting, the caller's or the default, checked under the name `names` gives it. */
const setting = <A>(
  input: Input,
  names: Names,
  key: NumericSetting,
  check: (value: number, parameter: string) => Effect.Effect<A, Invalid>
): Effect.Effect<A, Invalid> => check(input[key] ?? defaults[key], names[key])

/**
 * Validates settings; the error names the bad setting as `names` does (by default the field itself).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (input: Input = {}, names: Names = fieldNames): Effect.Effect<DeriverConfig, Invalid> =>
  Effect.gen(function*() {
    const workers = yield* setting(input, names, "workers", positiveInteger)
    const base = input.pollingSleepIntervalSeconds ?? defaults.pollingSleepIntervalSeconds
    const max = input.pollingSleepMaxIntervalSeconds ?? defaults.pollingSleepMaxIntervalSeconds
    const baseMillis = yield* positiveSeconds(base, names.pollingSleepIntervalSeconds)
    const maxMillis = toMillis(
      yield* Parameters.check(
        Parameters.MillisAtLeast(base),
        `a finite number of seconds >= ${names.pollingSleepIntervalSeconds} (${base})`
      )(max, names.pollingSleepMaxIntervalSeconds)
    )
    const multiplier = yield* setting(input, names, "pollingBackoffMultiplier", Parameters.multiplier)
    const ratio = yield* setting(input, names, "pollingJitterRatio", Parameters.ratio)
    const initial = input.pollingInitialInterval ?? defaults.pollingInitialInterval
    const initialInterval = initial === "base" || initial === "max"
      ? initial
      : yield* Effect.fail(invalid(names.pollingInitialInterval, initial, "base or max"))
    const startup = input.pollingStartupJitterSeconds ?? max
    const startupJitterMillis = yield* nonNegativeSeconds(startup, names.pollingStartupJitterSeconds)
    const staleTimeoutMillis = (yield* setting(input, names, "staleSessionTimeoutMinutes", positiveMinutes)) * 60_000
    const cleanupIntervalMillis = yield* setting(input, names, "staleWorkUnitCleanupIntervalSeconds", positiveSeconds)
    const shutdownGraceMillis = yield* setting(input, names, "shutdownGraceSeconds", nonNegativeSeconds)
    const batchSize = yield* setting(input, names, "batchSize", positiveInteger)
    const slowPollMillis = yield* setting(input, names, "overloadSlowPollSeconds", positiveSeconds)
    const overloadMax = input.overloadMaxIntervalSeconds ?? max * 10
    const overloadMaxMillis = toMillis(
      yield* Parameters.check(
        Parameters.MillisAtLeast(max),
        `a finite number of seconds >= ${names.pollingSleepMaxIntervalSeconds} (${max})`
      )(overloadMax, names.overloadMaxIntervalSeconds)
    )
    const recoveryMillis = yield* positiveSeconds(
      input.overloadRecoverySeconds ?? max,
      names.overloadRecoverySeconds
    )
    const historyRetentionMillis = (yield* setting(input, names, "historyRetentionHours", positiveHours)) * 3_600_000
    const claimTimeoutMillis = yield* setting(input, names, "claimTimeoutSeconds", positiveSeconds)
    const backoff: PollBackoff.Settings = {
      baseMillis,
      multiplier,
      maxMillis,
      enabled: input.pollingBackoffEnabled ?? defaults.pollingBackoffEnabled,
      ratio
    }
    return {
      workers,
      backoff,
      ...derived(backoff),
      initialInterval,
      startupJitterMillis,
      staleTimeoutMillis,
      cleanupIntervalMillis,
      shutdownGraceMillis,
      batchSize,
      prefetch: yield* prefetchRange(
        input.prefetch ?? Math.min(prefetchPerWorker * workers, maxPrefetch),
        names.prefetch
      ),
      claimAlong: true,
      overload: { slowPollMillis, maxMillis: overloadMaxMillis, multiplier, recoveryMillis },
      overloadEnabled: input.overloadEnabled ?? defaults.overloadEnabled,
      historyRetentionMillis,
      claimTimeoutMillis,
      wakeMinIntervalMillis: yield* setting(input, names, "wakeMinIntervalSeconds", nonNegativeSeconds)
    }
  })

/** How each kind of setting is read from the environment. */
const read: { readonly [K in keyof Kinds]: (name: string) => Config.Config<Kinds[K]> } = {
  number: Config.Number,
  boolean: Config.Boolean,
  string: Config.String
}

/**
 * The settings from the environment variables `names` gives (the deriver app: `DERIVER_*`). A value that is not a
 * number, or outside its range, fails with a `ConfigError` whose message names the variable, the value and the
 * range.
 *
 * @since 0.2.0
 * @category config
 */
export const config = (names: Names): Config.Config<DeriverConfig> =>
  Config.all(
    Object.fromEntries(
      (Object.keys(settings) as Array<keyof typeof settings>).map((key) => {
        const reader: (name: string) => Config.Config<unknown> = read[settings[key]]
        return [key, Config.option(reader(names[key]))]
      })
    )
  ).pipe(
    Config.map((options) => {
      const input: Record<string, unknown> = {}
      for (const [key, value] of Object.entries(options)) {
        if (value._tag === "Some") input[key] = value.value
      }
      return input as Input
    }),
    InvalidParameter.validateConfig((input) => make(input, names))
  )
