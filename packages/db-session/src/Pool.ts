/**
 * The two pool classes. `null`: every checkout opens a fresh connection and closes it afterwards (for
 * deployments behind Supavisor or PgBouncer, which do the pooling). `queue`: an in-process pool of at most
 * `poolSize` connections; waiting for a free slot shares the checkout's connect timeout, and running out of it
 * is `Saturated`. Either way a checkout makes at most one connection attempt, and nothing here knocks twice.
 * Every attempt goes through the checkout's `ConnectGuard` (a checkout that reuses an idle connection makes
 * none and does not ask).
 *
 * @since 0.1.0
 */
import { Effect, Semaphore } from "effect"
import type { Scope } from "effect"
import * as Classify from "./Classify.ts"
import { ConnectGuard } from "./ConnectGuard.ts"
import type { Driver, RawConnection } from "./Driver.ts"
import type { CheckoutError } from "./Errors.ts"
import * as Tls from "./Tls.ts"

/**
 * `null`: a fresh connection per checkout; `queue`: an in-process pool.
 *
 * @since 0.1.0
 * @category models
 */
export type PoolClass = "null" | "queue"

/**
 * What a pool needs to open connections.
 *
 * @since 0.1.0
 * @category models
 */
export interface PoolOptions {
  readonly driver: Driver
  /** The URL and TLS settings, resolved at start (`Tls.resolve`). */
  readonly tls: Tls.Settings
  readonly applicationName: string
  readonly connectTimeoutMillis: number
  readonly poolClass: PoolClass
  readonly poolSize: number
}

/**
 * A source of connections.
 *
 * @since 0.1.0
 * @category models
 */
export interface Pool {
  /**
   * One checkout: a connection that belongs to the current scope and is returned (or closed) when the scope
   * closes, whatever the exit. `elapsedMillis` reads the time since the checkout began, for error reports.
   */
  readonly checkout: (elapsedMillis: Effect.Effect<number>) => Effect.Effect<RawConnection, CheckoutError, Scope.Scope>
}

const timedOut = (timeoutMillis: number) =>
  Object.assign(new Error(`no connection within the connect timeout (${timeoutMillis} ms)`), {
    code: "CONNECT_TIMEOUT"
  })

const exhausted = (timeoutMillis: number, poolSize: number) =>
  Object.assign(
    new Error(`no free connection in the in-process pool (size ${poolSize}) within ${timeoutMillis} ms`),
    { code: "POOL_EXHAUSTED" }
  )

const classified = (elapsedMillis: Effect.Effect<number>) => (error: unknown) =>
  Effect.flatMap(elapsedMillis, (elapsed) => Effect.fail(Classify.checkoutFailure(error, elapsed)))

/**
 * The single attempt, through the checkout's guard: the driver's connect, bounded by `timeoutMillis` here as
 * well as by the driver's own timer. A failure is classified and returned; there is no second call. A guard's
 * wait does not count against the connect timeout.
 */
const attempt = (options: PoolOptions, timeoutMillis: number, elapsedMillis: Effect.Effect<number>) =>
  Effect.flatMap(Effect.service(ConnectGuard), (guard) =>
    guard.attempt(
      options.driver.connect({
        url: options.tls.url,
        tls: options.tls,
        applicationName: options.applicationName,
        timeoutMillis
      }).pipe(
        Effect.timeoutOrElse({
          duration: timeoutMillis,
          orElse: () => Effect.fail(timedOut(options.connectTimeoutMillis))
        }),
        // a TLS or certificate failure is worded to name TLS, the certificate and the sslmode
        Effect.catch((error) =>
          Effect.flatMap(
            elapsedMillis,
            (elapsed) => Effect.fail(Tls.explain(Classify.checkoutFailure(error, elapsed), error, options.tls.mode))
          )
        )
      )
    ))

const makeNull = (options: PoolOptions): Pool => ({
  checkout: (elapsedMillis) =>
    Effect.acquireRelease(
      attempt(options, options.connectTimeoutMillis, elapsedMillis),
      (connection) => connection.close,
      { interruptible: true }
    )
})

const makeQueue = Effect.fnUntraced(function*(options: PoolOptions) {
  const slots = yield* Semaphore.make(options.poolSize)
  const idle: Array<RawConnection> = []
  let closed = false
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      closed = true
      return Effect.forEach(idle.splice(0), (connection) => connection.close, {
        concurrency: "unbounded",
        discard: true
      })
    })
  )

  // A failed or interrupted checkout may still leave a healthy connection (a unique violation, an interrupt
  // between statements); `reusable` knows: a statement cut short or a transaction left open invalidates it.
  const release = (connection: RawConnection) =>
    Effect.suspend(() => {
      if (!closed && connection.reusable()) {
        idle.push(connection)
        return Effect.void
      }
      return connection.close
    })

  const checkout = (elapsedMillis: Effect.Effect<number>) =>
    Effect.gen(function*() {
      yield* slots.takeScoped(1).pipe(
        Effect.timeoutOrElse({
          duration: options.connectTimeoutMillis,
          orElse: () => Effect.fail(exhausted(options.connectTimeoutMillis, options.poolSize))
        }),
        Effect.catch(classified(elapsedMillis))
      )
      // Idle connections that died while parked (server restart, pooler idle timeout) are dropped without a
      // network round trip; they are not this checkout's attempt.
      let reused: RawConnection | undefined
      while (reused === undefined && idle.length > 0) {
        const candidate = idle.pop()!
        if (candidate.reusable()) reused = candidate
        else yield* candidate.close
      }
      if (reused !== undefined) {
        const connection = reused
        return yield* Effect.acquireRelease(Effect.succeed(connection), release)
      }
      const remaining = Math.max(1, options.connectTimeoutMillis - (yield* elapsedMillis))
      return yield* Effect.acquireRelease(attempt(options, remaining, elapsedMillis), release, { interruptible: true })
    })

  return { checkout } satisfies Pool
})

/**
 * The pool for `options.poolClass`; a `queue` pool closes its idle connections when the scope closes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: PoolOptions): Effect.Effect<Pool, never, Scope.Scope> =>
  options.poolClass === "null" ? Effect.succeed(makeNull(options)) : makeQueue(options)
