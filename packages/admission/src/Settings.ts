/**
 * The gate's settings: what it may admit, how long a request may wait, and how long it stops knocking after
 * the database said it is unavailable. Validated once, at start: in code with {@link make}, from the
 * environment with {@link config} (an invalid value stops the process naming the variable).
 *
 * @since 0.1.0
 */
import { PollBackoff } from "@resilience/jitter"
import { InvalidParameter, Parameters } from "@resilience/parameters"
import { Config, Duration, Effect, Option, Schema } from "effect"
import type * as Controller from "./Controller.ts"

/**
 * Validated settings, in plain numbers.
 *
 * @category models
 * @since 0.1.0
 */
export interface Settings {
  /** Off: every request goes straight to the database, as without the gate. */
  readonly enabled: boolean
  /** The limit never exceeds this; it starts here (the database is presumed healthy until it says otherwise). */
  readonly maxConcurrency: number
  /** The limit never falls below this. */
  readonly minConcurrency: number
  /** A request that gets no permit within this many milliseconds is shed; 0 sheds at once. */
  readonly queueTimeoutMillis: number
  /** An admitted request that takes longer than this counts as overload (the limit decreases); 0 disables. */
  readonly slowMillis: number
  /**
   * The circuit opens when, among the last `2 × tripFailures` recorded outcomes (at least `tripFailures` of
   * them), at least half were unavailable: a saturated database opens it after `tripFailures` requests, a few
   * scattered timeouts in a busy but working one do not.
   */
  readonly tripFailures: number
  /** Nominal length of the first open window, in milliseconds; each failed probe doubles it, up to `openMaxMillis`. */
  readonly openMillis: number
  /**
   * The cap of the open window, in milliseconds: consecutive failed probes lengthen the window 1 → 2 → 4 → … ×
   * `openMillis` up to this (jittered like every window); an answered probe returns it to `openMillis`.
   */
  readonly openMaxMillis: number
  /** Each open window is uniform in [(1 − r)·openMillis, (1 + r)·openMillis]. */
  readonly openJitterRatio: number
  /** Multiplicative decrease of the limit on each unavailable or overloaded outcome, in (0, 1). */
  readonly decreaseRatio: number
}

/**
 * Settings as given; every field has a default ({@link defaults}).
 *
 * @category models
 * @since 0.1.0
 */
export type Options = Partial<Settings>

/**
 * The defaults, for one API instance behind a pooler with a fresh connection per request:
 * the limit starts at 256 (above the concurrency one instance's event loop sustains, so on a healthy database
 * it never binds) and may fall to 1; a request waits at most 50 ms for a permit; an admitted request slower
 * than 10 s is overload (a pooler queueing clients; not the API's own event loop under a burst, whose latency
 * reaches seconds on a small machine); 5 unavailable outcomes among the last 10 open the circuit for 1 s, then
 * 2, 4, 8, 16 and at most 30 s (the spec's cap of the deriver's poll backoff) while probes keep failing, each
 * window jittered by ±50 %; each unavailable or overloaded outcome cuts the limit by 10 %.
 *
 * @category constants
 * @since 0.1.0
 */
export const defaults: Settings = {
  enabled: true,
  maxConcurrency: 256,
  minConcurrency: 1,
  queueTimeoutMillis: 50,
  slowMillis: 10_000,
  tripFailures: 5,
  // The circuit's windows default to the spec's poll schedule (1 s → 30 s, ±50 %), defined once in jitter.
  openMillis: Duration.toMillis(PollBackoff.defaults.base),
  openMaxMillis: Duration.toMillis(PollBackoff.defaults.max),
  openJitterRatio: PollBackoff.defaults.ratio,
  decreaseRatio: 0.9
}

/** Largest concurrency limit accepted. */
const maxAllowedConcurrency = 100_000
/** Largest duration accepted, in milliseconds (one minute: this is a gate, not a queue). */
const maxAllowedMillis = 60_000
/** Largest open-window cap accepted, in milliseconds (ten minutes). */
const maxAllowedOpenMillis = 600_000

const integerIn = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

const rules = {
  maxConcurrency: [integerIn(1, maxAllowedConcurrency), `an integer in [1, ${maxAllowedConcurrency}]`],
  minConcurrency: [integerIn(1, maxAllowedConcurrency), `an integer in [1, ${maxAllowedConcurrency}]`],
  queueTimeoutMillis: [integerIn(0, maxAllowedMillis), `an integer in [0, ${maxAllowedMillis}]`],
  slowMillis: [integerIn(0, maxAllowedMillis), `an integer in [0, ${maxAllowedMillis}] (0 disables)`],
  tripFailures: [integerIn(1, 1_000), "an integer in [1, 1000]"],
  openMillis: [integerIn(1, maxAllowedMillis), `an integer in [1, ${maxAllowedMillis}]`],
  openMaxMillis: [
    integerIn(1, maxAllowedOpenMillis),
    `an integer in [1, ${maxAllowedOpenMillis}], at least the open window`
  ],
  openJitterRatio: [Parameters.Ratio, "a number in [0, 1]"],
  decreaseRatio: [
    Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThan(1)),
    "a number in (0, 1), exclusive"
  ]
} as const

const checks = Object.entries(rules).map(([name, [schema, allowed]]) =>
  [name as keyof typeof rules, Parameters.check(schema as Schema.Schema<number>, allowed)] as const
)

/**
 * `minConcurrency` ≤ `maxConcurrency` and `openMillis` ≤ `openMaxMillis`, reported under the names the caller uses
 * (options or environment variables).
 */
const ordered = (settings: Settings, names: Record<"min" | "max" | "open" | "openMax", string>) =>
  settings.minConcurrency > settings.maxConcurrency
    ? Effect.fail(
      new InvalidParameter.InvalidParameter({
        parameter: names.min,
        value: settings.minConcurrency,
        allowed: `an integer in [1, ${names.max} = ${settings.maxConcurrency}]`
      })
    )
    : settings.openMaxMillis < settings.openMillis
    ? Effect.fail(
      new InvalidParameter.InvalidParameter({
        parameter: names.openMax,
        value: settings.openMaxMillis,
        allowed: `an integer in [${names.open} = ${settings.openMillis}, ${maxAllowedOpenMillis}]`
      })
    )
    : Effect.succeed(settings)

/**
 * Validates options over {@link defaults}: every number within its range, and `minConcurrency` ≤
 * `maxConcurrency`. The error names the parameter, the value and what is allowed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: Options = {}): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const settings: Settings = {
      ...defaults,
      ...options,
      openMaxMillis: options.openMaxMillis ??
        Math.max(defaults.openMaxMillis, options.openMillis ?? defaults.openMillis)
    }
    for (const [name, check] of checks) yield* check(settings[name], name)
    return yield* ordered(settings, {
      min: "minConcurrency",
      max: "maxConcurrency",
      open: "openMillis",
      openMax: "openMaxMillis"
    })
  })

/**
 * The names of the environment variables {@link config} reads, one per setting (the multiplicative decrease is
 * not read from the environment): the application chooses them (this repository's API passes `API_ADMISSION_*`,
 * from `@resilience/environment`).
 *
 * @category models
 * @since 0.2.0
 */
export type Names = { readonly [K in Exclude<keyof Settings, "decreaseRatio">]: string }

const fromEnv = <K extends keyof typeof rules & keyof Names>(names: Names, key: K) =>
  Config.schema(rules[key][0], names[key]).pipe(Config.withDefault(defaults[key]))

/**
 * The settings from the environment variables `names` gives (unset means the default; the open window's cap
 * defaults to 30 s or the open window, whichever is longer). A value outside its range, the minimum concurrency
 * above the maximum, or the open window's cap below the open window, is a `ConfigError` that names the variable.
 *
 * @category constructors
 * @since 0.2.0
 */
export const config = (names: Names): Config.Config<Settings> =>
  Config.all({
    enabled: Config.Boolean(names.enabled).pipe(Config.withDefault(defaults.enabled)),
    maxConcurrency: fromEnv(names, "maxConcurrency"),
    minConcurrency: fromEnv(names, "minConcurrency"),
    queueTimeoutMillis: fromEnv(names, "queueTimeoutMillis"),
    slowMillis: fromEnv(names, "slowMillis"),
    tripFailures: fromEnv(names, "tripFailures"),
    openMillis: fromEnv(names, "openMillis"),
    openMaxMillis: Config.schema(rules.openMaxMillis[0], names.openMaxMillis).pipe(Config.option),
    openJitterRatio: fromEnv(names, "openJitterRatio")
  }).pipe(
    InvalidParameter.validateConfig(({ openMaxMillis, ...settings }) =>
      ordered({
        ...settings,
        openMaxMillis: Option.getOrElse(openMaxMillis, () => Math.max(defaults.openMaxMillis, settings.openMillis)),
        decreaseRatio: defaults.decreaseRatio
      }, {
        min: names.minConcurrency,
        max: names.maxConcurrency,
        open: names.openMillis,
        openMax: names.openMaxMillis
      })
    )
  )

/**
 * The controller's policy of the settings (`@resilience/fleet-sim` reads it too): the limit within
 * `[minConcurrency, maxConcurrency]`, growing by one per answer while at least half of it is in use, with no hold
 * after a decrease; the circuit tripping on `tripFailures`, its windows `openMillis` × 2 per failed probe, capped
 * at `openMaxMillis`, jittered by `openJitterRatio`.
 *
 * @category policies
 * @since 0.3.0
 */
export const policy = (settings: Settings): Controller.Policy => ({
  limit: {
    minConcurrency: settings.minConcurrency,
    maxConcurrency: settings.maxConcurrency,
    decreaseRatio: settings.decreaseRatio,
    slowMillis: settings.slowMillis,
    growth: "whenBusy"
  },
  breaker: {
    tripFailures: settings.tripFailures,
    windows: {
      baseMillis: settings.openMillis,
      multiplier: 2,
      maxMillis: Math.max(settings.openMillis, settings.openMaxMillis),
      enabled: true,
      ratio: settings.openJitterRatio
    }
  }
})
