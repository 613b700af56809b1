/**
 * Command-line overrides of a preset: every model parameter as a flag, each validated with `Schema` before a
 * run starts (an invalid value stops the CLI with a message that names the flag and the allowed range).
 *
 * @since 0.1.0
 */
import { Settings as AdmissionSettings } from "@resilience/admission"
import type { DeriverConfig } from "@resilience/deriver"
import { Variables } from "@resilience/environment"
import { PollBackoff } from "@resilience/jitter"
import { InvalidParameter } from "@resilience/parameters"
import { Effect, Schema } from "effect"
import * as Model from "./Model.ts"

/**
 * A flag outside its allowed range: `InvalidParameter` of `@resilience/parameters`, the parameter named as the flag
 * (`--derivers`).
 *
 * @since 0.1.0
 */
export type InvalidOption = InvalidParameter.InvalidParameter

/**
 * The error for `--option` given `value`, allowed `allowed`.
 *
 * @since 0.1.0
 */
export const invalidOption = (option: string, value: unknown, allowed: string): InvalidOption =>
  new InvalidParameter.InvalidParameter({ parameter: `--${option}`, value, allowed })

/** An allowed range: the schema that checks a value and the words that name the range in an error. */
interface Range {
  readonly schema: Schema.Codec<number, number>
  readonly allowed: string
}

const range = (schema: Schema.Codec<number, number>, allowed: string): Range => ({ schema, allowed })

const Positive = range(Schema.Finite.check(Schema.isGreaterThan(0)), "a number > 0")
const NonNegative = range(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0)), "a number >= 0")
const PositiveInt = range(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1)), "an integer >= 1")
const NonNegativeInt = range(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)), "an integer >= 0")
const Probability = range(Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 })), "a number in [0, 1]")
const OnOff = range(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 1 })), "0 (off) or 1 (on)")
const AtLeastOne = range(Schema.Finite.check(Schema.isGreaterThanOrEqualTo(1)), "a number >= 1")

type Mutable<T> = {
  -readonly [K in keyof T]: NonNullable<T[K]> extends object ? Mutable<NonNullable<T[K]>> | Extract<T[K], undefined>
    : T[K]
}

/** The keys of `T` that hold a number. */
type NumericKey<T> = { [K in keyof T]-?: NonNullable<T[K]> extends number ? K : never }[keyof T] & string

/**
 * One overridable parameter: its flag, what it means, its schema and where it goes.
 *
 * @since 0.1.0
 */
export interface Override {
  readonly flag: string
  readonly description: string
  readonly schema: Schema.Codec<number, number>
  readonly allowed: string
  readonly apply: (params: Mutable<Model.Params>, value: number) => void
}

const seconds = (value: number) => value * 1000

/** An override: its flag, what it means, its range and where the value goes. */
const option = (flag: string, description: string, range: Range, apply: Override["apply"]): Override => ({
  flag,
  description,
  ...range,
  apply
})

/** An override of one admission gate setting (the `adaptive` policy), named after its variable. */
const gateOverride = (
  flag: string,
  description: string,
  key: "maxConcurrency" | "queueTimeoutMillis" | "openMillis" | "openMaxMillis" | "slowMillis",
  range: Range
): Override =>
  option(flag, `adaptive: ${description} (${Variables.admission[key]})`, range, (p, v) => {
    if (p.admission !== undefined) p.admission.gate[key] = v
  })

/**
 * An override of one setting of the wake path (absent from the parameters: starts from `Model.noWake`): the
 * numeric setting `set` names, or what `set` does.
 */
const wakeOverride = (
  flag: string,
  description: string,
  range: Range,
  set: NumericKey<Model.Wake> | ((wake: Mutable<Model.Wake>, value: number) => void)
): Override =>
  option(flag, description, range, (p, v) => {
    const wake = p.wake ?? { ...Model.noWake }
    if (typeof set === "string") wake[set] = v
    else set(wake, v)
    p.wake = wake
  })

/** The parts of the parameters whose numeric settings a flag can set directly. */
type Section = "poll" | "pooler" | "database" | "api" | "work" | "spike" | "outage"

/** Where a value goes: `params[section][key] = value × scale`; nothing when the scenario leaves the section out. */
const into = <S extends Section>(
  section: S,
  key: NumericKey<NonNullable<Model.Params[S]>>,
  scale = 1
): Override["apply"] =>
(p, v) => {
  const target = p[section] as Record<string, number> | undefined
  if (target !== undefined) target[key] = v * scale
}

/**
 * Every parameter the CLI can override.
 *
 * @since 0.1.0
 */
export const overrides: ReadonlyArray<Override> = [
  option("derivers", "fleet size (derivers, one per tenant)", PositiveInt, (p, v) => (p.derivers = v)),
  option("horizon", "simulated seconds", PositiveInt, (p, v) => (p.horizonSeconds = v)),
  option(
    "base-interval",
    "poll base interval, seconds (DERIVER_POLLING_SLEEP_INTERVAL_SECONDS)",
    Positive,
    into("poll", "baseMillis", 1000)
  ),
  option(
    "max-interval",
    "poll max interval, seconds (DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS)",
    Positive,
    into("poll", "maxMillis", 1000)
  ),
  option(
    "multiplier",
    "poll backoff multiplier (DERIVER_POLLING_BACKOFF_MULTIPLIER)",
    AtLeastOne,
    into("poll", "multiplier")
  ),
  option(
    "jitter-ratio",
    "per-cycle jitter ratio, 0 = none (overrides the policy)",
    Probability,
    into("poll", "ratio")
  ),
  option(
    "startup-jitter",
    "startup delay upper bound, seconds, 0 = none (overrides the policy)",
    NonNegative,
    (p, v) => (p.startupJitterMillis = seconds(v))
  ),
  option(
    "connect-timeout",
    "failfast: bound on one acquisition, seconds (DB_CONNECT_TIMEOUT_SECONDS)",
    Positive,
    (p, v) => {
      if (p.acquisition.kind === "failfast") p.acquisition.connectTimeoutMillis = seconds(v)
    }
  ),
  option(
    "retry-budget",
    "retry: give up after this many seconds (CONNECTION_RETRY_MAX_DELAY_SECONDS)",
    NonNegative,
    (p, v) => {
      if (p.acquisition.kind === "retry") p.acquisition.retry.budgetMillis = seconds(v)
    }
  ),
  option(
    "max-client-connections",
    "pooler client-connection limit (EMAXCONN beyond it)",
    PositiveInt,
    into("pooler", "maxClientConnections")
  ),
  option(
    "backend-ceiling",
    "pooler backend ceiling (server connections)",
    PositiveInt,
    into("pooler", "backendCeiling")
  ),
  option("pooler-threads", "pooler worker threads", PositiveInt, into("pooler", "threads")),
  option(
    "connect-cost",
    "pooler work per accepted connection attempt, ms",
    NonNegative,
    into("pooler", "connectCostMillis")
  ),
  option(
    "reject-cost",
    "pooler work per refused connection attempt, ms",
    NonNegative,
    into("pooler", "rejectCostMillis")
  ),
  option(
    "relay-cost",
    "pooler work per transaction relay, ms",
    NonNegative,
    into("pooler", "relayCostMillis")
  ),
  option(
    "queue-timeout",
    "pooler: drop a client waiting this long for a backend, seconds",
    Positive,
    into("pooler", "queueTimeoutMillis", 1000)
  ),
  option("cores", "database cores (queries at full speed at once)", Positive, into("database", "cores")),
  option("claim-ms", "claim query base cost, ms", Positive, into("database", "claimMillis")),
  option(
    "contention",
    "extra database slowdown per oversubscribed core, 0 = pure processor sharing",
    NonNegative,
    into("database", "contention")
  ),
  option(
    "api-rps",
    "open-loop API requests per second through the same pooler, 0 = none",
    NonNegative,
    into("api", "requestsPerSecond")
  ),
  option("api-query-ms", "API query cost, ms", Positive, into("api", "queryMillis")),
  option(
    "work-probability",
    "chance that a claim finds work (then the loop resets to the base interval)",
    Probability,
    into("work", "probability")
  ),
  option(
    "handler-ms",
    "handler time of a claimed unit, off the database, ms",
    NonNegative,
    into("work", "handlerMillis")
  ),
  option(
    "claim-timeout",
    "adaptive: the claim's statement timeout, seconds, 0 = none (DB_STATEMENT_TIMEOUT_SECONDS)",
    NonNegative,
    (p, v) => {
      if (p.overload !== undefined) p.claimTimeoutMillis = seconds(v)
    }
  ),
  option(
    "slow-poll",
    "adaptive: a poll slower than this is an overload signal, seconds (DERIVER_OVERLOAD_SLOW_POLL_SECONDS)",
    Positive,
    () => {}
  ),
  option(
    "overload-max-interval",
    "adaptive: the overload cap of the poll interval, seconds (DERIVER_OVERLOAD_MAX_INTERVAL_SECONDS; default 10 × max-interval)",
    Positive,
    () => {}
  ),
  option(
    "overload-recovery",
    "adaptive: healthy polling in which the overload floor falls from its cap to 0, seconds (DERIVER_OVERLOAD_RECOVERY_SECONDS; default max-interval)",
    Positive,
    () => {}
  ),
  option(
    "api-instances",
    "adaptive: API instances, one admission gate each",
    PositiveInt,
    (p, v) => {
      if (p.admission !== undefined) p.admission.instances = v
    }
  ),
  gateOverride("admission-max-concurrency", "each gate's highest limit", "maxConcurrency", PositiveInt),
  gateOverride(
    "admission-queue-timeout",
    "a request waits at most this long for a permit, ms",
    "queueTimeoutMillis",
    NonNegativeInt
  ),
  gateOverride("admission-open", "the circuit's first open window, ms", "openMillis", PositiveInt),
  gateOverride(
    "admission-open-max",
    "the cap of the open window, which doubles per failed probe, ms",
    "openMaxMillis",
    PositiveInt
  ),
  gateOverride(
    "admission-slow",
    "an answer slower than this lowers the limit, ms, 0 = never",
    "slowMillis",
    NonNegativeInt
  ),
  option("spike-at", "spike scenario: start of the load spike, seconds", NonNegative, into("spike", "atSeconds")),
  option("spike-seconds", "spike scenario: length of the load spike, seconds", NonNegative, into("spike", "seconds")),
  option(
    "spike-backends",
    "spike scenario: backends the spike's queries hold",
    NonNegativeInt,
    into("spike", "backends")
  ),
  wakeOverride("wake", "an API write wakes its tenant's deriver: 0 off, 1 on", OnOff, (w, v) => (w.enabled = v === 1)),
  wakeOverride(
    "write-fraction",
    "share of the open-loop API requests that are writes, each giving a random tenant work (and a wake)",
    Probability,
    "writeFraction"
  ),
  wakeOverride(
    "wake-delay-ms",
    "from the API's answer to its deriver's wake, ms",
    NonNegative,
    "delayMillis"
  ),
  wakeOverride(
    "wake-min-interval-ms",
    "the least time from a deriver's last poll start to a woken poll's start, ms (DERIVER_WAKE_MIN_INTERVAL_SECONDS)",
    NonNegative,
    "minIntervalMillis"
  ),
  wakeOverride(
    "wake-spread-after-failure-ms",
    "a candidate, not the deriver's: a woken poll after a failed poll waits a uniform delay below this, ms (0: none)",
    NonNegative,
    "spreadAfterFailureMillis"
  ),
  option("outage-at", "outage scenario: the database goes down, seconds", NonNegative, into("outage", "atSeconds")),
  option("outage-seconds", "outage scenario: how long it stays down, seconds", NonNegative, into("outage", "seconds")),
  option(
    "resend-window",
    "outage scenario: each tenant's resent write lands uniformly within this after the return, seconds",
    Positive,
    into("outage", "resendWindowMillis", 1000)
  )
]

/**
 * Applies validated overrides (`flag → value`) to a preset and validates the poll settings with
 * `@resilience/jitter`'s own rules.
 *
 * @since 0.1.0
 */
export const apply = (
  preset: Model.Params,
  values: ReadonlyMap<string, number>
): Effect.Effect<Model.Params, InvalidOption> =>
  Effect.gen(function*() {
    const params = structuredClone(preset) as Mutable<Model.Params>
    for (const override of overrides) {
      const value = values.get(override.flag)
      if (value === undefined) continue
      if (!Schema.is(override.schema)(value)) {
        return yield* invalidOption(override.flag, value, override.allowed)
      }
      override.apply(params, value)
    }
    const poll = yield* PollBackoff.settings({
      base: params.poll.baseMillis,
      max: params.poll.maxMillis,
      multiplier: params.poll.multiplier,
      ratio: params.poll.ratio,
      enabled: params.poll.enabled
    }).pipe(
      Effect.mapError((e) => invalidOption(e.parameter, e.value, e.allowed))
    )
    const overload = params.overload === undefined ? undefined : yield* Model.overloadSettings(poll, {
      overloadSlowPollSeconds: values.get("slow-poll"),
      overloadMaxIntervalSeconds: values.get("overload-max-interval"),
      overloadRecoverySeconds: values.get("overload-recovery")
    }).pipe(
      Effect.mapError((e) => invalidOption(flagOf[e.parameter] ?? e.parameter, e.value, e.allowed))
    )
    const admission = params.admission === undefined ? undefined : {
      ...params.admission,
      gate: yield* AdmissionSettings.make(params.admission.gate).pipe(
        Effect.mapError((e) => invalidOption(gateFlagOf[e.parameter] ?? e.parameter, e.value, e.allowed))
      )
    }
    return { ...params, poll, overload, admission }
  })

/** The flag of each admission setting that can be overridden. */
const gateFlagOf: Record<string, string> = {
  maxConcurrency: "admission-max-concurrency",
  queueTimeoutMillis: "admission-queue-timeout",
  openMillis: "admission-open",
  openMaxMillis: "admission-open-max",
  slowMillis: "admission-slow"
}

/** The flag of each deriver setting the overload settings can name in an error (`DeriverConfig.make` names fields). */
const flagOf: Partial<Record<keyof DeriverConfig.Input, string>> & Record<string, string> = {
  overloadSlowPollSeconds: "slow-poll",
  overloadMaxIntervalSeconds: "overload-max-interval",
  overloadRecoverySeconds: "overload-recovery"
}
