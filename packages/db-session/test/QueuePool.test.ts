/**
 * The `queue` pool's slots and the checkout's `ConnectGuard`: a slot bounds connections (open or being opened),
 * not checkouts whose attempt waits for the guard. A guard that holds attempts back (the deriver's open circuit)
 * must not leave every slot to checkouts waiting in it, or every other checkout, even one that could reuse an
 * idle connection, waits out its connect timeout on the pool (`POOL_EXHAUSTED`) for as long as the guard holds.
 */
import { assert, describe, layer } from "@effect/vitest"
import { CountingProxy, Eventually } from "@resilience/test-db"
import { Cause, Deferred, Effect, Exit, Fiber } from "effect"
import { Classify, ConnectGuard, DbSession } from "../src/index.ts"
import { appName, backends, Server, session } from "./support.ts"

/** A guard that holds every attempt until `open`, counting the attempts it was asked for and how each ended. */
const holdingGuard = Effect.gen(function*() {
  const opened = yield* Deferred.make<void>()
  let asked = 0
  let waiting = 0
  const ended: Array<Exit.Exit<unknown, unknown>> = []
  const guard: ConnectGuard.Guard = {
    attempt: (attempt) =>
      Effect.gen(function*() {
        asked += 1
        waiting += 1
        yield* Deferred.await(opened).pipe(Effect.ensuring(Effect.sync(() => (waiting -= 1))))
        const exit = yield* Effect.exit(attempt)
        ended.push(exit)
        return yield* exit
      })
  }
  return {
    guard,
    open: Deferred.succeed(opened, undefined),
    asked: Effect.sync(() => asked),
    waiting: Effect.sync(() => waiting),
    ended
  }
})

/**
 * A checkout (under `guard`, else the default one) that holds its connection until `release` completes: its fiber,
 * and the wait for its connection (failing as the checkout does, if it fails first).
 */
const holding = (release: Deferred.Deferred<void>, guard?: ConnectGuard.Guard) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const checkedOut = yield* Deferred.make<void, unknown>()
    const checkout = db.withConnection((connection) =>
      Effect.andThen(
        connection.query("select 1"),
        Effect.andThen(Deferred.succeed(checkedOut, undefined), Deferred.await(release))
      )
    ).pipe(Effect.onError((cause) => Deferred.failCause(checkedOut, cause)))
    const fiber = yield* Effect.forkChild(
      guard === undefined ? checkout : Effect.provideService(checkout, ConnectGuard.ConnectGuard, guard)
    )
    return { fiber, checkedOut: Deferred.await(checkedOut) }
  })

/** Whether an exit failed waiting for a slot of the in-process pool. */
const poolExhausted = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit)
  && exit.cause.reasons.some((reason) => Cause.isFailReason(reason) && Classify.isPoolExhausted(reason.error))

/** The connect timeout of these pools; each guard holds its attempts longer than that. */
const connectTimeoutMillis = 500
const guardWait = Effect.sleep(`${connectTimeoutMillis + 200} millis`)

const pool = (url: string, driver: "pg" | "postgres", poolSize: number, applicationName: string) =>
  session({
    url,
    driver,
    poolClass: "queue",
    poolSize,
    connectTimeout: `${connectTimeoutMillis} millis`,
    applicationName
  })

layer(Server.layer, { excludeTestServices: true, timeout: "120 seconds" })("queue pool and ConnectGuard", (it) => {
  for (const driver of ["pg", "postgres"] as const) {
    describe(driver, () => {
      it.effect("a checkout whose attempt waits in the guard holds no slot: another checkout gets one", () =>
        Effect.gen(function*() {
          const { cluster } = yield* Server
          const proxy = yield* CountingProxy.start(cluster)
          const applicationName = appName(`guard_slot_${driver}`)
          yield* Effect.gen(function*() {
            const db = yield* DbSession
            const held = yield* holdingGuard
            const release = yield* Deferred.make<void>()
            const waiter = yield* holding(release, held.guard)
            yield* Eventually.until("a checkout waiting in the guard", Effect.map(held.waiting, (n) => n === 1), {
              within: "10 seconds"
            })
            yield* guardWait
            // the only slot is free: this checkout (the default guard) connects, then parks its connection
            yield* db.query("select 1")
            assert.strictEqual(yield* proxy.attempts, 1)
            assert.strictEqual(yield* held.asked, 1)
            // the guard lets the waiting attempt through, longer than the connect timeout after it began (the
            // guard's wait does not count): it takes the slot for itself and connects; the parked connection
            // beyond the pool's size is closed first, so the slot still bounds the connections
            yield* held.open
            yield* waiter.checkedOut
            assert.strictEqual(yield* proxy.attempts, 2)
            assert.strictEqual(held.ended.length, 1)
            assert.isTrue(Exit.isSuccess(held.ended[0]!))
            assert.strictEqual(
              yield* Eventually.satisfying("one backend of the pool", backends(applicationName), (n) => n === 1),
              1
            )
            yield* Deferred.succeed(release, undefined)
            yield* Fiber.join(waiter.fiber)
            // the connection it opened is parked and reused
            yield* db.query("select 1")
            assert.strictEqual(yield* proxy.attempts, 2)
          }).pipe(Effect.provide(pool(proxy.url(cluster.url), driver, 1, applicationName)))
        }))

      it.effect("checkouts waiting in the guard, as many as the slots, leave an idle connection to be reused", () =>
        Effect.gen(function*() {
          const { cluster } = yield* Server
          const proxy = yield* CountingProxy.start(cluster)
          const applicationName = appName(`guard_reuse_${driver}`)
          yield* Effect.gen(function*() {
            const db = yield* DbSession
            const held = yield* holdingGuard
            // one connection in use, then two checkouts whose attempts wait in the guard
            const releaseFirst = yield* Deferred.make<void>()
            const first = yield* holding(releaseFirst)
            yield* first.checkedOut
            const release = yield* Deferred.make<void>()
            const waiters = [yield* holding(release, held.guard), yield* holding(release, held.guard)]
            yield* Eventually.until("two checkouts waiting in the guard", Effect.map(held.waiting, (n) => n === 2), {
              within: "10 seconds"
            })
            yield* guardWait
            // the connection in use is parked
            yield* Deferred.succeed(releaseFirst, undefined)
            yield* Fiber.join(first.fiber)
            assert.strictEqual(yield* proxy.attempts, 1)
            // a checkout under the holding guard gets a slot and reuses the idle connection, without asking it
            const rows = yield* db.query("select 1 as one").pipe(
              Effect.provideService(ConnectGuard.ConnectGuard, held.guard)
            )
            assert.deepStrictEqual(rows, [{ one: 1 }])
            assert.strictEqual(yield* held.asked, 2, "the reuse asked the guard nothing")
            assert.strictEqual(yield* proxy.attempts, 1)
            // the guard lets both through: each takes a slot for its attempt, and the idle connection beyond the
            // pool's size is closed: never more connections than slots
            yield* held.open
            yield* Effect.forEach(waiters, (waiter) => waiter.checkedOut, { discard: true })
            assert.strictEqual(yield* proxy.attempts, 3)
            assert.isTrue(held.ended.every(Exit.isSuccess))
            assert.strictEqual(
              yield* Eventually.satisfying("two backends of the pool", backends(applicationName), (n) => n === 2),
              2
            )
            yield* Deferred.succeed(release, undefined)
            yield* Effect.forEach(waiters, (waiter) => Fiber.join(waiter.fiber), { discard: true })
          }).pipe(Effect.provide(pool(proxy.url(cluster.url), driver, 2, applicationName)))
        }))

      it.effect("no slot for an attempt the guard let through: POOL_EXHAUSTED within the connect timeout, no attempt", () =>
        Effect.gen(function*() {
          const { cluster } = yield* Server
          const proxy = yield* CountingProxy.start(cluster)
          yield* Effect.gen(function*() {
            const db = yield* DbSession
            const held = yield* holdingGuard
            const waiting = yield* Effect.forkChild(
              Effect.flip(db.withConnection(() => Effect.void)).pipe(
                Effect.provideService(ConnectGuard.ConnectGuard, held.guard)
              )
            )
            yield* Eventually.until("a checkout waiting in the guard", Effect.map(held.waiting, (n) => n === 1), {
              within: "10 seconds"
            })
            // the only slot is taken meanwhile, and kept
            const release = yield* Deferred.make<void>()
            const holder = yield* holding(release)
            yield* holder.checkedOut
            assert.strictEqual(yield* proxy.attempts, 1)
            yield* guardWait
            // longer than the connect timeout in the guard: the wait for a slot still has all of it
            const opened = Date.now()
            yield* held.open
            const error = yield* Fiber.join(waiting)
            const waited = Date.now() - opened
            assert.isTrue(Classify.isPoolExhausted(error), `${error._tag}: ${error.message}`)
            assert.isAtLeast(waited, connectTimeoutMillis - 100)
            // the guard saw its attempt end as a wait in vain for the pool: no connection was tried
            assert.strictEqual(held.ended.length, 1)
            assert.isTrue(poolExhausted(held.ended[0]!))
            assert.strictEqual(yield* proxy.attempts, 1)
            yield* Deferred.succeed(release, undefined)
            yield* Fiber.join(holder.fiber)
          }).pipe(Effect.provide(pool(proxy.url(cluster.url), driver, 1, appName(`guard_exhausted_${driver}`))))
        }))
    })
  }
})
