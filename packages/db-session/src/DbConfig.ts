/**
 * The session's settings: the options of `DbSession.layer`, their defaults, and a `Config` of them read from
 * environment variables whose names the application gives (`DbSession.layerConfig(names)`).
 *
 * @since 0.1.0
 */
import { Config, Duration, type Redacted, Schema } from "effect"
import type { DriverName } from "./Driver.ts"
import type { PoolClass } from "./Pool.ts"
import * as Tls from "./Tls.ts"

/**
 * How to reach the database and how to pool.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Connection string; kept redacted in logs when given as `Redacted`. */
  readonly url: Redacted.Redacted<string> | string
  /** Bound on one checkout: the connection attempt plus, for `queue`, the wait for a free slot. */
  readonly connectTimeout: Duration.Input
  readonly poolClass: PoolClass
  /** Size of the in-process pool (`queue` only). */
  readonly poolSize: number
  readonly driver: DriverName
  /** `application_name` shown in `pg_stat_activity`; default {@link defaults}. */
  readonly applicationName?: string
  /**
   * Deadline of one statement; default {@link defaults} (30 seconds). Inside a transaction the server enforces it
   * (`SET LOCAL statement_timeout`, with the `BEGIN`); every statement also has a client-side bound of this plus
   * one second, after which the statement is cancelled on the server and its connection closed.
   */
  readonly statementTimeout?: Duration.Input | undefined
  /**
   * TLS to the database, with libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` (see `Tls`); the URL's
   * own `ssl*` parameters win over these. Default: `sslmode=disable`.
   */
  readonly tls?: Tls.Options | undefined
}

/**
 * The defaults of {@link Options}, defined once: the session applies them to options left out, and
 * {@link config} to variables left unset.
 *
 * @since 0.2.0
 * @category defaults
 */
export const defaults = {
  connectTimeout: Duration.seconds(2),
  poolClass: "null",
  poolSize: 10,
  driver: "pg",
  applicationName: "resilience",
  statementTimeout: Duration.seconds(30)
} as const satisfies Omit<Options, "url">

/**
 * The names of the environment variables {@link config} reads, one per option: the application chooses them
 * (this repository's apps take theirs from `@resilience/environment`). Durations are read in seconds.
 *
 * @since 0.2.0
 * @category models
 */
export interface Names {
  readonly url: string
  readonly connectTimeoutSeconds: string
  readonly poolClass: string
  readonly poolSize: string
  readonly driver: string
  readonly applicationName: string
  readonly statementTimeoutSeconds: string
  /** `sslmode` (the URL's `?sslmode=` wins). */
  readonly sslmode: string
  /** `sslrootcert`: the CA file (the URL's wins). */
  readonly sslrootcert: string
  /** `sslcert`: the client certificate file (the URL's wins). */
  readonly sslcert: string
  /** `sslkey`: the client key file (the URL's wins). */
  readonly sslkey: string
}

/** The connect timeout's range, seconds. */
const connectSeconds = Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(3600))
const statementSeconds = Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(86_400))
const poolSize = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10_000 }))

const seconds = (duration: Duration.Duration) => Duration.toSeconds(duration)
const fromSeconds = (value: number) => Duration.millis(Math.round(value * 1000))

/** An optional file path: unset is `undefined`. */
const file = (name: string) =>
  Config.String(name).pipe(Config.option, Config.map((value) => value._tag === "Some" ? value.value : undefined))

/**
 * {@link Options} from the environment variables `names` gives, parsed and validated (a bad value is a
 * `ConfigError` naming its variable); unset variables take {@link defaults}.
 *
 * @since 0.2.0
 * @category config
 */
export const config = (names: Names): Config.Config<Options> =>
  Config.all({
    url: Config.Redacted(names.url),
    connectTimeout: Config.schema(connectSeconds, names.connectTimeoutSeconds).pipe(
      Config.withDefault(seconds(defaults.connectTimeout)),
      Config.map(fromSeconds)
    ),
    poolClass: Config.Literals(["null", "queue"], names.poolClass).pipe(Config.withDefault(defaults.poolClass)),
    poolSize: Config.schema(poolSize, names.poolSize).pipe(Config.withDefault(defaults.poolSize)),
    driver: Config.Literals(["pg", "postgres"], names.driver).pipe(Config.withDefault(defaults.driver)),
    applicationName: Config.String(names.applicationName).pipe(Config.withDefault(defaults.applicationName)),
    statementTimeout: Config.schema(statementSeconds, names.statementTimeoutSeconds).pipe(
      Config.withDefault(seconds(defaults.statementTimeout)),
      Config.map(fromSeconds)
    ),
    tls: Config.all({
      sslmode: Config.Literals(Tls.sslModes, names.sslmode).pipe(Config.withDefault(Tls.defaultMode)),
      sslrootcert: file(names.sslrootcert),
      sslcert: file(names.sslcert),
      sslkey: file(names.sslkey)
    })
  })
