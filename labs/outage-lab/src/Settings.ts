/**
 * One lab run's settings: the policy, the trigger, the real parts' limits and the load. Every value is checked
 * before anything starts; a bad one stops the CLI naming the flag and its allowed range (the simulator's
 * `InvalidOption`, the `InvalidParameter` of `@resilience/parameters` named by the flag).
 */
import { Model, Options } from "@resilience/fleet-sim"
import { Effect } from "effect"
import { availableParallelism } from "node:os"

/**
 * The lab's policies: the simulator's five of the same names and meanings. `fixed` runs the deriver with
 * `DERIVER_OVERLOAD_ENABLED=false` (the spec's fix alone), as do the three before it; `adaptive` with the
 * deriver's defaults (the fix, its overload signals and its checkout gate). The lab has no API admission
 * gate: its API traffic is the same under `fixed` and `adaptive`.
 */
export const policies: ReadonlyArray<Model.Policy> = Model.policies

/** Whether a policy runs the deriver's overload signals and checkout gate (`adaptive` only). */
export const overloadAware = (policy: Model.Policy): boolean => policy === "adaptive"

/** What pushes the system over: a stall of every pooled backend, or a mass restart of the fleet. */
export type Trigger = "stall" | "restart"

/** The triggers. */
export const triggers: ReadonlyArray<Trigger> = ["stall", "restart"]

/**
 * How PgBouncer authenticates its clients: `plain` (cleartext password, the cheapest); `scram-sha-256` with the
 * password in its auth file (PgBouncer derives the salted password, a 4096-round PBKDF2, on every login);
 * `scram-verifier`, SCRAM against the verifier PostgreSQL stores (as `auth_query` from `pg_authid` gives it:
 * no PBKDF2 on the pooler's side, the client still runs one).
 */
export type Auth = "plain" | "scram-sha-256" | "scram-verifier"

/** The auth methods. */
export const auths: ReadonlyArray<Auth> = ["plain", "scram-sha-256", "scram-verifier"]

/**
 * TLS on the client side of the pooler, as managed poolers run it (clients connect with `sslmode=require`):
 * `none` (plain text, the lab's first runs); `pgbouncer` (PgBouncer's own `client_tls_sslmode = require` with a
 * certificate the lab generates); `stunnel` (Debian's stunnel4 in front of a plain PgBouncer, its `pgsql`
 * protocol answering the client's SSLRequest and terminating TLS, so that every client, refused or not,
 * costs the pooler a handshake before PgBouncer sees it).
 */
export type Tls = "none" | "pgbouncer" | "stunnel"

/** The TLS set-ups. */
export const tlsModes: ReadonlyArray<Tls> = ["none", "pgbouncer", "stunnel"]

/** The key of the pooler's generated server certificate: ECDSA P-256, or RSA-2048 (a costlier signature). */
export type TlsKey = "p256" | "rsa2048"

/** The key types. */
export const tlsKeys: ReadonlyArray<TlsKey> = ["p256", "rsa2048"]

/** Everything one run needs. */
export interface Settings {
  /** The simulator's policies, same names and meanings. */
  readonly policy: Model.Policy
  readonly trigger: Trigger
  /** Real deriver loops, one schema each. */
  readonly derivers: number
  /** PostgreSQL `max_connections`. */
  readonly maxConnections: number
  /** PgBouncer `max_client_conn`: the client limit. */
  readonly maxClientConn: number
  /** PgBouncer `default_pool_size`: the backend ceiling (one database, one user: one pool). */
  readonly poolSize: number
  /** PgBouncer `query_wait_timeout`, seconds. */
  readonly queryWaitTimeoutSeconds: number
  readonly auth: Auth
  /** TLS between the clients and the pooler. */
  readonly tls: Tls
  /** The pooler certificate's key (with `tls` other than `none`). */
  readonly tlsKey: TlsKey
  /**
   * The CPU the pooler's processes (PgBouncer, and stunnel) are pinned to with `taskset`, so that the pooler
   * has one core as the simulator's one thread does; -1: not pinned.
   */
  readonly poolerCpu: number
  /** Open-loop API requests per second (Poisson) through the same pooler; 0 = none. */
  readonly apiRps: number
  /** What one API request holds its backend for (`pg_sleep`), milliseconds. */
  readonly apiQueryMillis: number
  /** When the trigger fires, seconds after the start. */
  readonly triggerAtSeconds: number
  /** How long the stall holds every pooled backend, seconds (stall only). */
  readonly stallSeconds: number
  /** The run stops by itself this many seconds after the start. */
  readonly horizonSeconds: number
  /** `DERIVER_POLLING_SLEEP_INTERVAL_SECONDS` and `…_MAX_INTERVAL_SECONDS` (production: 1 and 30). */
  readonly baseIntervalSeconds: number
  readonly maxIntervalSeconds: number
  /** `DB_CONNECT_TIMEOUT_SECONDS` of the failfast policies (production: 2). */
  readonly connectTimeoutSeconds: number
  /** Schemas the derivers share (deriver i serves schema i mod schemas); 0: one per deriver. */
  readonly schemas: number
  /**
   * Processed rows written into each schema's queue before the run; above 0 the partial index of unprocessed
   * items is also dropped, so every claim scans this history (a database made to thrash on CPU).
   */
  readonly history: number
  /** `DERIVER_CLAIM_TIMEOUT_SECONDS`: a poll's checkout plus claim is cut short (cancelled) after this. */
  readonly claimTimeoutSeconds: number
  /**
   * Each API request appends one domain message to schema 0 (instead of `pg_sleep`), the derivers of schema 0
   * fold them, and the run ends with the consistency checker's verdict.
   */
  readonly writes: boolean
}

/** Production poll settings and the simulator's policy names, on a fleet this machine can run. */
export const defaults: Settings = {
  policy: "fixed",
  trigger: "stall",
  derivers: 200,
  maxConnections: 40,
  maxClientConn: 300,
  poolSize: 20,
  queryWaitTimeoutSeconds: 120,
  auth: "plain",
  tls: "none",
  tlsKey: "p256",
  poolerCpu: -1,
  apiRps: 100,
  apiQueryMillis: 20,
  triggerAtSeconds: 40,
  stallSeconds: 20,
  horizonSeconds: 120,
  baseIntervalSeconds: Model.incident.poll.baseMillis / 1000,
  maxIntervalSeconds: Model.incident.poll.maxMillis / 1000,
  connectTimeoutSeconds: Model.fixedConnectTimeoutMillis / 1000,
  schemas: 0,
  history: 0,
  claimTimeoutSeconds: 10,
  writes: false
}

/** The number of schemas a run creates. */
export const schemaCount = (settings: Settings): number =>
  settings.schemas === 0 ? settings.derivers : Math.min(settings.schemas, settings.derivers)

/** When the trigger ends, seconds after the start (the restart is an instant). */
export const triggerEndSeconds = (settings: Settings): number =>
  settings.triggerAtSeconds + (settings.trigger === "stall" ? settings.stallSeconds : 0)

/** CPUs of this machine, for `pooler-cpu`. */
const availableCpus = availableParallelism()

const check = (ok: boolean, option: string, value: unknown, allowed: string) =>
  ok ? Effect.void : Effect.fail(Options.invalidOption(option, value, allowed))

const integer = (value: number, minimum: number) => Number.isInteger(value) && value >= minimum

const oneOf = <A extends string>(option: string, value: A, allowed: ReadonlyArray<A>) =>
  check(allowed.includes(value), option, value, `one of ${allowed.join(", ")}`)

/** An integer in [minimum, maximum]; without a maximum, an integer >= minimum. */
const integerIn = (option: string, value: number, minimum: number, maximum?: number) =>
  check(
    integer(value, minimum) && (maximum === undefined || value <= maximum),
    option,
    value,
    maximum === undefined ? `an integer >= ${minimum}` : `an integer in [${minimum}, ${maximum}]`
  )

/** A number in (0, maximum]. */
const positiveUpTo = (option: string, value: number, maximum: number) =>
  check(value > 0 && value <= maximum, option, value, `a number in (0, ${maximum}]`)

/**
 * Checks each value and the relations between them (the pool fits in `max_connections` with room for the
 * sampler and the set-up; the trigger ends before the horizon).
 */
export const validate = (settings: Settings): Effect.Effect<Settings, Options.InvalidOption> =>
  Effect.gen(function*() {
    const s = settings
    yield* oneOf("policy", s.policy, policies)
    yield* oneOf("trigger", s.trigger, triggers)
    yield* oneOf("auth", s.auth, auths)
    yield* oneOf("tls", s.tls, tlsModes)
    yield* oneOf("tls-key", s.tlsKey, tlsKeys)
    yield* check(
      s.poolerCpu === -1 || (integer(s.poolerCpu, 0) && s.poolerCpu < availableCpus),
      "pooler-cpu",
      s.poolerCpu,
      `-1 (not pinned) or an integer in [0, ${availableCpus - 1}] (this machine's CPUs)`
    )
    yield* integerIn("derivers", s.derivers, 1, 2000)
    yield* integerIn("pool-size", s.poolSize, 1)
    yield* check(
      integer(s.maxConnections, s.poolSize + 4),
      "max-connections",
      s.maxConnections,
      `an integer >= pool-size + 4 (${s.poolSize + 4}: the pool, the sampler and the set-up)`
    )
    yield* integerIn("max-client-conn", s.maxClientConn, 2, 10_000)
    yield* integerIn("query-wait-timeout", s.queryWaitTimeoutSeconds, 1)
    yield* check(s.apiRps >= 0 && s.apiRps <= 2000, "api-rps", s.apiRps, "a number in [0, 2000]")
    yield* check(s.apiQueryMillis > 0, "api-query-ms", s.apiQueryMillis, "a number > 0")
    yield* check(s.baseIntervalSeconds > 0, "base-interval", s.baseIntervalSeconds, "a number > 0")
    yield* check(
      s.maxIntervalSeconds >= s.baseIntervalSeconds,
      "max-interval",
      s.maxIntervalSeconds,
      `a number >= base-interval (${s.baseIntervalSeconds})`
    )
    yield* positiveUpTo("connect-timeout", s.connectTimeoutSeconds, 3600)
    yield* check(integer(s.schemas, 0), "schemas", s.schemas, "an integer >= 0 (0: one per deriver)")
    yield* integerIn("history", s.history, 0, 20_000_000)
    yield* positiveUpTo("claim-timeout", s.claimTimeoutSeconds, 3600)
    yield* check(s.triggerAtSeconds >= 0, "trigger-at", s.triggerAtSeconds, "a number >= 0")
    yield* check(s.stallSeconds > 0, "stall-seconds", s.stallSeconds, "a number > 0")
    yield* check(
      integer(s.horizonSeconds, 1) && s.horizonSeconds > triggerEndSeconds(s) && s.horizonSeconds <= 3600,
      "horizon",
      s.horizonSeconds,
      `an integer in (${triggerEndSeconds(s)}, 3600]: after the trigger's end`
    )
    return s
  })

/** The numeric settings by flag name, for `sweep`'s configurations (`api-rps=200,pool-size=4`). */
export const numericFlags = {
  "derivers": "derivers",
  "pooler-cpu": "poolerCpu",
  "max-connections": "maxConnections",
  "max-client-conn": "maxClientConn",
  "pool-size": "poolSize",
  "query-wait-timeout": "queryWaitTimeoutSeconds",
  "api-rps": "apiRps",
  "api-query-ms": "apiQueryMillis",
  "trigger-at": "triggerAtSeconds",
  "stall-seconds": "stallSeconds",
  "horizon": "horizonSeconds",
  "base-interval": "baseIntervalSeconds",
  "max-interval": "maxIntervalSeconds",
  "connect-timeout": "connectTimeoutSeconds",
  "schemas": "schemas",
  "history": "history",
  "claim-timeout": "claimTimeoutSeconds"
} as const satisfies Record<string, keyof Settings>

/**
 * Applies one configuration, `flag=value` pairs separated by commas (`auth=scram-sha-256,api-rps=200`), to
 * `base`; an unknown flag or a value that is not a number stops with the flags allowed.
 */
export const withConfiguration = (
  base: Settings,
  configuration: string
): Effect.Effect<Settings, Options.InvalidOption> =>
  Effect.gen(function*() {
    let settings: Settings = base
    for (const pair of configuration.split(",").map((p) => p.trim()).filter((p) => p.length > 0)) {
      const [flag = "", value = ""] = pair.split("=").map((p) => p.trim())
      if (flag === "auth" || flag === "trigger" || flag === "tls" || flag === "tls-key") {
        settings = { ...settings, [flag === "tls-key" ? "tlsKey" : flag]: value }
        continue
      }
      const field = (numericFlags as Record<string, keyof Settings>)[flag]
      const number = Number(value)
      if (field === undefined) {
        return yield* Effect.fail(
          Options.invalidOption(
            "configs",
            pair,
            `flag=value with a flag among auth, trigger, tls, tls-key, ${Object.keys(numericFlags).join(", ")}`
          )
        )
      }
      if (value === "" || !Number.isFinite(number)) {
        return yield* Effect.fail(Options.invalidOption(flag, value, "a number"))
      }
      settings = { ...settings, [field]: number }
    }
    return yield* validate(settings)
  })
