/**
 * The session's settings: the options of `DbSession.layer`, and the environment variables that
 * `DbSession.layerConfig` reads them from (names follow the reference service).
 *
 * @since 0.1.0
 */
import { Config, Duration, type Redacted, Schema } from "effect"
import type { DriverName } from "./Driver.ts"
import type { PoolClass } from "./Pool.ts"

/**
 * How to reach the database and how to pool.
 *
 * @since 0.1.0
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
  /** `application_name` shown in `pg_stat_activity`; default `resilience`. */
  readonly applicationName?: string
  /**
   * Deadline of one statement; default 30 seconds. Inside a transaction the server enforces it
   * (`SET LOCAL statement_timeout`, with the `BEGIN`); every statement also has a client-side bound of this plus
   * one second, after which the statement is cancelled on the server and its connection closed.
   */
  readonly statementTimeout?: Duration.Input | undefined
}

const positive = Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(3600))
const statementSeconds = Schema.Finite.check(Schema.isGreaterThan(0), Schema.isLessThanOrEqualTo(86_400))
const poolSize = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 10_000 }))

/**
 * The environment variables of {@link DbSession.layerConfig}, parsed and validated.
 *
 * @since 0.1.0
 */
export const config: Config.Config<Options> = Config.all({
  url: Config.Redacted("DATABASE_URL"),
  connectTimeout: Config.schema(positive, "DB_CONNECT_TIMEOUT_SECONDS").pipe(
    Config.withDefault(2),
    Config.map((seconds) => Duration.millis(Math.round(seconds * 1000)))
  ),
  poolClass: Config.Literals(["null", "queue"], "DB_POOL_CLASS").pipe(Config.withDefault("null" as const)),
  poolSize: Config.schema(poolSize, "DB_POOL_SIZE").pipe(Config.withDefault(10)),
  driver: Config.Literals(["pg", "postgres"], "DB_DRIVER").pipe(Config.withDefault("pg" as const)),
  applicationName: Config.String("DB_APPLICATION_NAME").pipe(Config.withDefault("resilience")),
  statementTimeout: Config.schema(statementSeconds, "DB_STATEMENT_TIMEOUT_SECONDS").pipe(
    Config.withDefault(30),
    Config.map((seconds) => Duration.millis(Math.round(seconds * 1000)))
  )
})
