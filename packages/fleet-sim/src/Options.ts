/**
 * Command-line overrides of a preset: every model parameter as a flag, each validated with `Schema` before a
 * run starts (an invalid value stops the CLI with a message that names the flag and the allowed range).
 *
 * @since 0.1.0
 */
import { Settings as AdmissionSettings } from "@resilience/admission"
import { DeriverConfig } from "@resilience/deriver"
import { InvalidParameter, PollBackoff } from "@resilience/jitter"
import { Effect, Schema } from "effect"
import * as Model from "./Model.ts"

/**
 * A flag outside its allowed range: jitter's `InvalidParameter`, the parameter named as the flag (`--derivers`).
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

const Positive = Schema.Finite.check(Schema.isGreaterThan(0))
const NonNegative = Schema.Finite.check(Schema.isGreaterThanOrEqualTo(0))
const PositiveInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))
const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
const Probability = Schema.Finite.check(Schema.isBetween({ minimum: 0, maximum: 1 }))

type Mutable<T> = {
  -readonly [K in keyof T]: NonNullable<T[K]> extends object ? Mutable<NonNullable<T[K]>> | Extract<T[K], undefined>
    : T[K]
}

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

/** An override of one admission gate setting (the `adaptive` policy), named after its variable. */
function gateOverride(
  flag: string,
  description: string,
  key: "maxConcurrency" | "queueTimeoutMillis" | "openMillis" | "slowMillis",
  schema: Schema.Codec<number, number>,
  range: string
): Override {
  return {
    flag,
    description: `adaptive: ${description} (${AdmissionSettings.variables[key]})`,
    schema,
    allowed: `an integer ${range}`,
    apply: (p, v) => {
      if (p.admission !== undefined) p.admission.gate[key] = v
    }
  }
}

/**
 * Every parameter the CLI can override.
 *
 * @since 0.1.0
 */
export const overrides: ReadonlyArray<Override> = [
  {
    flag: "derivers",
    description: "fleet size (derivers, one per tenant)",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => (p.derivers = v)
  },
  {
    flag: "horizon",
    description: "simulated seconds",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => (p.horizonSeconds = v)
  },
  {
    flag: "base-interval",
    description: "poll base interval, seconds (DERIVER_POLLING_SLEEP_INTERVAL_SECONDS)",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.poll.baseMillis = seconds(v))
  },
  {
    flag: "max-interval",
    description: "poll max interval, seconds (DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS)",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.poll.maxMillis = seconds(v))
  },
  {
    flag: "multiplier",
    description: "poll backoff multiplier (DERIVER_POLLING_BACKOFF_MULTIPLIER)",
    schema: Schema.Finite.check(Schema.isGreaterThanOrEqualTo(1)),
    allowed: "a number >= 1",
    apply: (p, v) => (p.poll.multiplier = v)
  },
  {
    flag: "jitter-ratio",
    description: "per-cycle jitter ratio, 0 = none (overrides the policy)",
    schema: Probability,
    allowed: "a number in [0, 1]",
    apply: (p, v) => (p.poll.ratio = v)
  },
  {
    flag: "startup-jitter",
    description: "startup delay upper bound, seconds, 0 = none (overrides the policy)",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.startupJitterMillis = seconds(v))
  },
  {
    flag: "connect-timeout",
    description: "failfast: bound on one acquisition, seconds (DB_CONNECT_TIMEOUT_SECONDS)",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => {
      if (p.acquisition.kind === "failfast") p.acquisition.connectTimeoutMillis = seconds(v)
    }
  },
  {
    flag: "retry-budget",
    description: "retry: give up after this many seconds (CONNECTION_RETRY_MAX_DELAY_SECONDS)",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => {
      if (p.acquisition.kind === "retry") p.acquisition.retry.budgetMillis = seconds(v)
    }
  },
  {
    flag: "max-client-connections",
    description: "pooler client-connection limit (EMAXCONN beyond it)",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => (p.pooler.maxClientConnections = v)
  },
  {
    flag: "backend-ceiling",
    description: "pooler backend ceiling (server connections)",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => (p.pooler.backendCeiling = v)
  },
  {
    flag: "pooler-threads",
    description: "pooler worker threads",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => (p.pooler.threads = v)
  },
  {
    flag: "connect-cost",
    description: "pooler work per accepted connection attempt, ms",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.pooler.connectCostMillis = v)
  },
  {
    flag: "reject-cost",
    description: "pooler work per refused connection attempt, ms",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.pooler.rejectCostMillis = v)
  },
  {
    flag: "relay-cost",
    description: "pooler work per transaction relay, ms",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.pooler.relayCostMillis = v)
  },
  {
    flag: "queue-timeout",
    description: "pooler: drop a client waiting this long for a backend, seconds",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.pooler.queueTimeoutMillis = seconds(v))
  },
  {
    flag: "cores",
    description: "database cores (queries at full speed at once)",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.database.cores = v)
  },
  {
    flag: "claim-ms",
    description: "claim query base cost, ms",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.database.claimMillis = v)
  },
  {
    flag: "contention",
    description: "extra database slowdown per oversubscribed core, 0 = pure processor sharing",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.database.contention = v)
  },
  {
    flag: "api-rps",
    description: "open-loop API requests per second through the same pooler, 0 = none",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.api.requestsPerSecond = v)
  },
  {
    flag: "api-query-ms",
    description: "API query cost, ms",
    schema: Positive,
    allowed: "a number > 0",
    apply: (p, v) => (p.api.queryMillis = v)
  },
  {
    flag: "work-probability",
    description: "chance that a claim finds work (then the loop resets to the base interval)",
    schema: Probability,
    allowed: "a number in [0, 1]",
    apply: (p, v) => (p.work.probability = v)
  },
  {
    flag: "handler-ms",
    description: "handler time of a claimed unit, off the database, ms",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => (p.work.handlerMillis = v)
  },
  {
    flag: "claim-timeout",
    description: "adaptive: the claim's statement timeout, seconds, 0 = none (DB_STATEMENT_TIMEOUT_SECONDS)",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => {
      if (p.overload !== undefined) p.claimTimeoutMillis = seconds(v)
    }
  },
  {
    flag: "slow-poll",
    description:
      "adaptive: a poll slower than this is an overload signal, seconds (DERIVER_OVERLOAD_SLOW_POLL_SECONDS)",
    schema: Positive,
    allowed: "a number > 0",
    apply: () => {}
  },
  {
    flag: "overload-max-interval",
    description:
      "adaptive: the overload cap of the poll interval, seconds (DERIVER_OVERLOAD_MAX_INTERVAL_SECONDS; default 10 × max-interval)",
    schema: Positive,
    allowed: "a number > 0",
    apply: () => {}
  },
  {
    flag: "recovery-factor",
    description: "adaptive: the overload floor's division per fast poll (DERIVER_OVERLOAD_RECOVERY_FACTOR)",
    schema: Schema.Finite.check(Schema.isGreaterThan(1)),
    allowed: "a number > 1",
    apply: () => {}
  },
  {
    flag: "api-instances",
    description: "adaptive: API instances, one admission gate each",
    schema: PositiveInt,
    allowed: "an integer >= 1",
    apply: (p, v) => {
      if (p.admission !== undefined) p.admission.instances = v
    }
  },
  gateOverride("admission-max-concurrency", "each gate's highest limit", "maxConcurrency", PositiveInt, ">= 1"),
  gateOverride(
    "admission-queue-timeout",
    "a request waits at most this long for a permit, ms",
    "queueTimeoutMillis",
    NonNegativeInt,
    ">= 0"
  ),
  gateOverride("admission-open", "the circuit's open window, ms", "openMillis", PositiveInt, ">= 1"),
  gateOverride(
    "admission-slow",
    "an answer slower than this lowers the limit, ms, 0 = never",
    "slowMillis",
    NonNegativeInt,
    ">= 0"
  ),
  {
    flag: "spike-at",
    description: "spike scenario: start of the load spike, seconds",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => {
      if (p.spike !== undefined) p.spike.atSeconds = v
    }
  },
  {
    flag: "spike-seconds",
    description: "spike scenario: length of the load spike, seconds",
    schema: NonNegative,
    allowed: "a number >= 0",
    apply: (p, v) => {
      if (p.spike !== undefined) p.spike.seconds = v
    }
  },
  {
    flag: "spike-backends",
    description: "spike scenario: backends the spike's queries hold",
    schema: NonNegativeInt,
    allowed: "an integer >= 0",
    apply: (p, v) => {
      if (p.spike !== undefined) p.spike.backends = v
    }
  }
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
      overloadRecoveryFactor: values.get("recovery-factor")
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
  slowMillis: "admission-slow"
}

/** The flag of each deriver variable the overload settings can name in an error. */
const flagOf: Record<string, string> = {
  [DeriverConfig.variables.overloadSlowPollSeconds]: "slow-poll",
  [DeriverConfig.variables.overloadMaxIntervalSeconds]: "overload-max-interval",
  [DeriverConfig.variables.overloadRecoveryFactor]: "recovery-factor"
}
