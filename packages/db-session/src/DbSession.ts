/**
 * The database session service: scoped, single-attempt checkouts with a bounded connect timeout, typed
 * failures, acquisition metrics and a span per acquisition. Nothing here tries a second time; the caller
 * decides (the deriver backs off, the API answers 503).
 *
 * @since 0.1.0
 */
import { Clock, Config, ConfigProvider, Context, Duration, Effect, Exit, Fiber, Layer, Metric, Redacted } from "effect"
import * as Classify from "./Classify.ts"
import type { Connection } from "./Connection.ts"
import * as DbConfig from "./DbConfig.ts"
import type { Driver, DriverName, RawConnection } from "./Driver.ts"
import type { CheckoutError, DatabaseUnavailable, DbError, QueryFailed } from "./Errors.ts"
import * as Metrics from "./internal/Metrics.ts"
import * as PgDriver from "./internal/PgDriver.ts"
import * as PostgresDriver from "./internal/PostgresDriver.ts"
import * as Pool from "./Pool.ts"
import * as Tls from "./Tls.ts"

/**
 * The service. Every method is one checkout; the connection is released on success, failure and interruption.
 *
 * @since 0.1.0
 * @category services
 */
export class DbSession extends Context.Service<DbSession, {
  /** Runs `f` with one checked-out connection. */
  readonly withConnection: <A, E, R>(
    f: (connection: Connection) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | DbError, R>
  /** Runs `f` inside BEGIN … COMMIT on one connection; ROLLBACK on failure or interruption. */
  readonly transaction: <A, E, R>(
    f: (connection: Connection) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | DbError, R>
  /** Runs one statement on its own checkout. */
  readonly query: <Row = Record<string, unknown>>(
    sql: string,
    params?: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<Row>, DbError>
  /**
   * Runs `effect` with every use of this service inside it (queries, connections, transactions) on ONE
   * checkout: a request that reads and then writes makes one connection attempt, not several.
   */
  readonly oneCheckout: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | DbError, R>
}>()("@resilience/db-session/DbSession") {
  /**
   * A session with explicit options; a TLS setting that cannot work (`Tls.resolve`: an unknown `sslmode`, an
   * unreadable certificate file) fails the layer with an `InvalidTlsSetting` naming it, before any connection
   * attempt.
   */
  static readonly layer = (options: DbConfig.Options): Layer.Layer<DbSession, Tls.InvalidTlsSetting> =>
    Layer.effect(DbSession, make(options))

  /**
   * A session configured from the environment variables `names` gives (`DbConfig.config`): the application
   * names them, the options' defaults are `DbConfig.defaults`.
   */
  static readonly layerConfig = (names: DbConfig.Names): Layer.Layer<DbSession, Config.ConfigError> =>
    Layer.effect(
      DbSession,
      Effect.flatMap(
        DbConfig.config(names),
        // a TLS setting of the URL (or a certificate file) that cannot work stops the process as a ConfigError
        (options) =>
          Effect.mapError(
            make(options),
            (error) => new Config.ConfigError(new ConfigProvider.SourceError({ message: error.message }))
          )
      )
    )
}

/** The driver for a name. */
const driverFor = (name: DriverName): Driver => name === "pg" ? PgDriver.driver : PostgresDriver.driver

/** The client-side statement deadline passed: `STATEMENT_TIMEOUT`, transient in the table. */
const statementTimedOut = (deadlineMillis: number) =>
  Object.assign(
    new Error(
      `no answer to the statement within ${deadlineMillis} ms (the statement timeout + 1 s); cancelled on the server and its connection closed`
    ),
    { code: "STATEMENT_TIMEOUT" }
  )

const invalid = (message: string) => Effect.die(new Error(`@resilience/db-session: ${message}`))

/** Builds the service; the pool (and its idle connections) lives as long as the surrounding scope. */
const make = Effect.fnUntraced(function*(options: DbConfig.Options) {
  const connectTimeoutMillis = Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout))
  if (!(connectTimeoutMillis > 0) || !Number.isFinite(connectTimeoutMillis)) {
    return yield* invalid(`connectTimeout must be a positive, finite duration (got ${String(options.connectTimeout)})`)
  }
  const statementTimeoutMillis = Duration.toMillis(
    Duration.fromInputUnsafe(options.statementTimeout ?? DbConfig.defaults.statementTimeout)
  )
  if (!(statementTimeoutMillis > 0) || !Number.isFinite(statementTimeoutMillis)) {
    return yield* invalid(
      `statementTimeout must be a positive, finite duration (got ${String(options.statementTimeout)})`
    )
  }
  // The client-side bound: a little after the server's own timeout, so that inside a transaction the server
  // cancels first (57014, the connection stays usable) and the client only steps in when the server or the
  // path to it does not answer.
  const statementDeadlineMillis = statementTimeoutMillis + 1000
  if (!Number.isInteger(options.poolSize) || options.poolSize < 1) {
    return yield* invalid(`poolSize must be an integer >= 1 (got ${options.poolSize})`)
  }
  const driver = driverFor(options.driver)
  const tls = yield* Tls.resolve(
    Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url,
    options.tls
  )
  const pool = yield* Pool.make({
    driver,
    tls,
    applicationName: options.applicationName ?? DbConfig.defaults.applicationName,
    connectTimeoutMillis,
    poolClass: options.poolClass,
    poolSize: options.poolSize
  })

  const acquire = Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeNanos
    const elapsedMillis = Effect.map(Clock.currentTimeNanos, (now) => Number(now - startedAt) / 1e6)
    const exit = yield* Effect.exit(pool.checkout(elapsedMillis)).pipe(
      Effect.onInterrupt(() => Metric.update(Metrics.acquisitionsFor("interrupted", "none"), 1))
    )
    const seconds = (yield* elapsedMillis) / 1000
    if (Exit.isSuccess(exit)) {
      yield* Metric.update(Metrics.acquisitionsFor("ok", "none"), 1)
      yield* Metric.update(Metrics.acquisitionSecondsFor("ok"), seconds)
      yield* Effect.annotateCurrentSpan({ "db.acquisition.outcome": "ok" })
      yield* Effect.acquireRelease(
        Metric.modify(Metrics.connectionsInUse, 1),
        () => Metric.modify(Metrics.connectionsInUse, -1)
      )
      return exit.value
    }
    const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    if (failure !== undefined) {
      const error: CheckoutError = failure.error
      const reason = error._tag === "DatabaseUnavailable" ? error.reason : "Misconfigured"
      yield* Metric.update(Metrics.acquisitionsFor("failed", reason), 1)
      yield* Metric.update(Metrics.acquisitionSecondsFor("failed"), seconds)
      yield* Effect.annotateCurrentSpan({
        "db.acquisition.outcome": "failed",
        "db.acquisition.reason": reason,
        "db.acquisition.code": error.code ?? ""
      })
    }
    return yield* exit
  }).pipe(
    Effect.withSpan("db.acquire", {
      attributes: { "db.driver": options.driver, "db.pool_class": options.poolClass }
    })
  )

  const connectionFor = (raw: RawConnection, released: () => boolean): Connection => ({
    query: <Row>(sql: string, params: ReadonlyArray<unknown> = []) =>
      Effect.suspend(() => {
        if (released()) return Effect.die(new Error("a Connection was used after its checkout ended"))
        return Effect.gen(function*() {
          const startedAt = yield* Clock.currentTimeNanos
          // The statement runs in a fiber of its own so that, at the deadline or when the caller is interrupted
          // (a shutdown, a request that gave up), it is cancelled on the server *before* its connection is
          // destroyed (interrupting the raw query destroys it): a statement waiting on a lock would otherwise run
          // on until it next writes to the socket, and through a pooler the cancel key is the client
          // connection's, which the pooler forgets once that connection is gone (PgBouncer then drops the
          // cancel). The cancel is bounded by the connect timeout.
          const running = yield* Effect.forkChild(raw.query(sql, params))
          const stop = Effect.andThen(raw.cancel(connectTimeoutMillis), Fiber.interrupt(running))
          return yield* Fiber.join(running).pipe(
            Effect.onInterrupt(() => stop),
            Effect.timeoutOrElse({
              duration: statementDeadlineMillis,
              // the deadline interrupts the join: `stop` above has run (cancelled, then destroyed) by now
              orElse: () => Effect.fail(statementTimedOut(statementDeadlineMillis))
            }),
            Effect.catch((error) =>
              Effect.flatMap(
                Clock.currentTimeNanos,
                (now) => Effect.fail(Classify.queryFailure(error, Number(now - startedAt) / 1e6))
              )
            )
          )
        }) as Effect.Effect<ReadonlyArray<Row>, QueryFailed | DatabaseUnavailable>
      })
  })

  /** One checkout in the current scope: the connection refuses use once the scope has ended. */
  const checkout = Effect.gen(function*() {
    const raw = yield* acquire
    let released = false
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        released = true
      })
    )
    return { raw, connection: connectionFor(raw, () => released) }
  })

  /** BEGIN … COMMIT around `f` on a checked-out connection; ROLLBACK on failure or interruption. */
  const inTransaction = <A, E, R>(
    raw: RawConnection,
    connection: Connection,
    f: (connection: Connection) => Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | QueryFailed | DatabaseUnavailable, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        // One round trip: the server's own deadline for every statement of this transaction, and only of it
        // (SET LOCAL ends with the transaction, so nothing leaks to the next user of a pooled connection).
        yield* restore(connection.query(`BEGIN; SET LOCAL statement_timeout = ${Math.round(statementTimeoutMillis)}`))
        const exit = yield* Effect.exit(restore(f(connection)))
        if (Exit.isSuccess(exit)) {
          yield* restore(connection.query("COMMIT"))
          return exit.value
        }
        // Runs on failure and on interruption alike, bounded: a server that does not answer the ROLLBACK
        // costs the connection (closed, never reused), not the fiber.
        const rolledBack = yield* connection.query("ROLLBACK").pipe(
          Effect.timeoutOrElse({ duration: connectTimeoutMillis, orElse: () => Effect.fail("ROLLBACK timed out") }),
          Effect.exit
        )
        if (Exit.isFailure(rolledBack)) raw.invalidate()
        return yield* exit
      })
    )

  /** The service bound to one checked-out connection: every use goes to it, no further checkout. */
  const pinned = (raw: RawConnection, connection: Connection): DbSession["Service"] =>
    DbSession.of({
      withConnection: (f) => f(connection),
      transaction: (f) => inTransaction(raw, connection, f),
      query: (sql, params) => connection.query(sql, params),
      oneCheckout: (effect) => effect
    })

  const withConnection = <A, E, R>(
    f: (connection: Connection) => Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | DbError, R> => Effect.scoped(Effect.flatMap(checkout, ({ connection }) => f(connection)))

  const transaction = <A, E, R>(
    f: (connection: Connection) => Effect.Effect<A, E, R>
  ): Effect.Effect<A, E | DbError, R> =>
    Effect.scoped(Effect.flatMap(checkout, ({ connection, raw }) => inTransaction(raw, connection, f)))

  const query = <Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<unknown>) =>
    withConnection((connection) => connection.query<Row>(sql, params))

  const oneCheckout = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | DbError, R> =>
    Effect.scoped(
      Effect.flatMap(
        checkout,
        ({ connection, raw }) => Effect.provideService(effect, DbSession, pinned(raw, connection))
      )
    )

  return DbSession.of({ withConnection, transaction, query, oneCheckout })
})
