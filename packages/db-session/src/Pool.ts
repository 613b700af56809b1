/**
 * The two pool classes. `null`: every checkout opens a fresh connection and closes it afterwards (for
 * deployments behind Supavisor or PgBouncer, which do the pooling). `queue`: an in-process pool of at most
 * `poolSize` connections; waiting for a free slot shares the checkout's connect timeout, and running out of it
 * is `Saturated` (`POOL_EXHAUSTED`). Either way a checkout makes at most one connection attempt, and nothing here
 * knocks twice. Every attempt goes through the checkout's `ConnectGuard` (a checkout that reuses an idle
 * connection makes none and does not ask); the guard's wait does not count against the connect timeout.
 *
 * A slot of the `queue` pool bounds connections (open or being opened), not checkouts waiting for their guard: a
 * checkout that finds no idle connection gives its slot back before the guard decides, and its attempt takes a
 * slot of its own once the guard lets it through (a wait in vain then reaches the guard as `POOL_EXHAUSTED`, with
 * no connection tried). So while a guard holds attempts back (a process backing off a database that refuses
 * connections), the checkouts waiting in it hold no slot, and the others keep getting slots: to reuse an idle
 * connection, or for an attempt the guard lets through.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Exit, Scope, Semaphore } from "effect"
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
 * The single attempt: the driver's connect, bounded by `timeoutMillis` here as well as by the driver's own timer. A
 * failure is classified and returned; there is no second call.
 */
const connectOnce = (options: PoolOptions, timeoutMillis: number, elapsedMillis: Effect.Effect<number>) =>
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

/** The single attempt through the checkout's guard. A guard's wait does not count against the connect timeout. */
const attempt = (options: PoolOptions, timeoutMillis: number, elapsedMillis: Effect.Effect<number>) =>
  Effect.flatMap(
    Effect.service(ConnectGuard),
    (guard) => guard.attempt(connectOnce(options, timeoutMillis, elapsedMillis))
  )

const makeNull = (options: PoolOptions): Pool => ({
  checkout: (elapsedMillis) =>
    Effect.acquireRelease(
      attempt(options, options.connectTimeoutMillis, elapsedMillis),
      (connection) => connection.close,
      { interruptible: true }
    )
})

/** One slot of the in-process pool taken by a checkout, with the connection it holds, if any yet. */
interface Slot {
  connection: RawConnection | undefined
}

const makeQueue = Effect.fnUntraced(function*(options: PoolOptions) {
  const slots = yield* Semaphore.make(options.poolSize)
  const idle: Array<RawConnection> = []
  /**
   * Slots taken now: one per checkout holding a connection, opening one, or about to look for an idle one. With the
   * idle connections, at most `poolSize` once a checkout's attempt starts (see `attemptInSlot`).
   */
  let taken = 0
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
  // The connection is parked (or closed) before its slot is free, so a checkout that gets the slot finds it.
  const giveBack = (slot: Slot) =>
    Effect.suspend(() => {
      const connection = slot.connection
      slot.connection = undefined
      if (connection === undefined) {
        taken -= 1
        return Effect.void
      }
      if (!closed && connection.reusable()) {
        idle.push(connection)
        taken -= 1
        return Effect.void
      }
      return Effect.andThen(connection.close, Effect.sync(() => (taken -= 1)))
    })

  /**
   * A slot, waiting at most `millis` (else `POOL_EXHAUSTED`: no connection attempt), held in a scope of its own
   * under `scope`: closing it gives the slot back early (parking or closing its connection first); otherwise it
   * goes back when `scope` closes, whatever the exit.
   */
  const takeSlot = (scope: Scope.Scope, millis: number, elapsedMillis: Effect.Effect<number>) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const own = yield* Scope.fork(scope)
        // registered first, so it runs last: the slot is free only after its connection is parked or closed
        yield* restore(
          Scope.provide(slots.takeScoped(1), own).pipe(
            Effect.timeoutOrElse({
              duration: millis,
              orElse: () => Effect.fail(exhausted(options.connectTimeoutMillis, options.poolSize))
            }),
            Effect.catch(classified(elapsedMillis))
          )
        ).pipe(Effect.onError(() => Scope.close(own, Exit.void)))
        const slot: Slot = { connection: undefined }
        taken += 1
        yield* Scope.addFinalizer(own, giveBack(slot))
        return { slot, own }
      })
    )

  /**
   * Puts an idle connection that is still usable in `slot`, if there is one. Idle connections that died while
   * parked (server restart, pooler idle timeout) are dropped on the way without a network round trip; they are
   * not this checkout's attempt.
   */
  const reuse = (slot: Slot) =>
    Effect.gen(function*() {
      while (idle.length > 0) {
        const candidate = idle.pop()!
        if (candidate.reusable()) {
          slot.connection = candidate
          return candidate
        }
        yield* candidate.close
      }
      return undefined
    })

  /**
   * What the guard lets through: a slot for the attempt itself (waiting at most `budgetMillis`, what the checkout's
   * connect timeout has left), then the single attempt, bounded by what is left after that wait. Connections parked
   * meanwhile beyond `poolSize` (with the slots taken) are closed first, so the slots still bound every connection,
   * open or being opened. A wait in vain here is `POOL_EXHAUSTED` too: the guard sees no connection attempt.
   */
  const attemptInSlot = (scope: Scope.Scope, budgetMillis: number, elapsedMillis: Effect.Effect<number>) =>
    Effect.gen(function*() {
      const waitedFrom = yield* Clock.currentTimeMillis
      const { slot } = yield* takeSlot(scope, budgetMillis, elapsedMillis)
      while (idle.length > 0 && idle.length + taken > options.poolSize) yield* idle.shift()!.close
      const remaining = Math.max(1, budgetMillis - ((yield* Clock.currentTimeMillis) - waitedFrom))
      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.tap(restore(connectOnce(options, remaining, elapsedMillis)), (connection) =>
          Effect.sync(() => {
            slot.connection = connection
          }))
      )
    })

  const checkout = (elapsedMillis: Effect.Effect<number>) =>
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      // A slot first, for an idle connection: reusing one makes no attempt and does not ask the guard.
      const first = yield* takeSlot(scope, options.connectTimeoutMillis, elapsedMillis)
      const reused = yield* reuse(first.slot)
      if (reused !== undefined) return reused
      // None: the slot goes back before the guard decides, so a checkout whose attempt waits for the guard (an
      // open circuit) holds no slot meanwhile, and the others keep getting slots; the attempt takes its own.
      yield* Scope.close(first.own, Exit.void)
      const budget = Math.max(1, options.connectTimeoutMillis - (yield* elapsedMillis))
      const guard = yield* ConnectGuard
      return yield* guard.attempt(attemptInSlot(scope, budget, elapsedMillis))
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
