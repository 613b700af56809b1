/**
 * Every statement has a deadline, for both drivers and both pool classes, against a real server: a statement
 * stuck behind a lock that another session holds fails at the client-side bound with `STATEMENT_TIMEOUT`
 * (transient), is stopped on the server (a CancelRequest; no backend is left waiting on the lock) and its
 * connection is not reused; inside a transaction the server's own `statement_timeout` cancels it first (57014); a
 * pooler that stops answering mid-statement (a silent proxy) costs the bound, not forever.
 */
import { assert, describe, layer } from "@effect/vitest"
import { CountingProxy, Eventually, TableLock } from "@resilience/test-db"
import { Effect } from "effect"
import { Classify, DbSession, QueryFailed } from "../src/index.ts"
import { appName, backends, matrix, Server, session } from "./support.ts"

/** Backends of `applicationName` waiting on a lock right now. */
const waitingOnLock = (applicationName: string) => backends(applicationName, { waitingOnLock: true })

const statementTimeoutMillis = 300

layer(Server.layer, { excludeTestServices: true, timeout: "120 seconds" })("Statement deadlines", (it) => {
  it.effect("setup", () =>
    Effect.gen(function*() {
      const server = yield* Server
      yield* server.admin("create table if not exists deadline_locked (id int)")
    }))

  for (const { driver, poolClass } of matrix) {
    describe(`${driver} / ${poolClass}`, () => {
      it.effect("a statement behind a lock: STATEMENT_TIMEOUT at the bound, cancelled on the server", () =>
        Effect.gen(function*() {
          const { cluster } = yield* Server
          const applicationName = appName(`deadline_${driver}_${poolClass}`)
          yield* Effect.scoped(
            Effect.gen(function*() {
              yield* TableLock.hold(cluster.url, "deadline_locked")
              const db = yield* DbSession
              const started = Date.now()
              const error = yield* Effect.flip(db.query("select * from deadline_locked"))
              const elapsed = Date.now() - started
              assert.instanceOf(error, QueryFailed, `${error._tag}: ${error.message}`)
              assert.strictEqual(error.code, "STATEMENT_TIMEOUT")
              assert.isTrue(Classify.isTransient(error))
              // The client-side bound is the server's timeout plus one second; generous upper margin for load.
              assert.isAtLeast(elapsed, statementTimeoutMillis + 1000 - 50)
              assert.isBelow(elapsed, statementTimeoutMillis + 1000 + 3000)
              // The CancelRequest stopped the statement on the server: nobody of ours waits on the lock any more.
              assert.strictEqual(
                yield* Eventually.satisfying(
                  "no backend waiting on the lock",
                  waitingOnLock(applicationName),
                  (n) => n === 0
                ),
                0
              )
              // Inside a transaction the server's own statement_timeout fires first: 57014, transient.
              const inTransaction = yield* Effect.flip(db.transaction((c) => c.query("select * from deadline_locked")))
              assert.strictEqual(inTransaction._tag === "QueryFailed" && inTransaction.code, "57014")
              assert.isTrue(Classify.isTransient(inTransaction))
              assert.strictEqual(
                yield* Eventually.satisfying(
                  "no backend waiting on the lock",
                  waitingOnLock(applicationName),
                  (n) => n === 0
                ),
                0
              )
            }).pipe(
              Effect.provide(session({
                url: cluster.url,
                applicationName,
                driver,
                poolClass,
                statementTimeout: `${statementTimeoutMillis} millis`
              }))
            )
          )
          // The lock is gone: the same session serves statements again.
          yield* Effect.gen(function*() {
            const db = yield* DbSession
            assert.deepStrictEqual(yield* db.query("select count(*)::int as n from deadline_locked"), [{ n: 0 }])
          }).pipe(Effect.provide(session({ url: cluster.url, applicationName, driver, poolClass })))
        }))

      it.effect("a pooler that stops answering mid-statement: STATEMENT_TIMEOUT at the bound, then it serves again", () =>
        Effect.gen(function*() {
          const { cluster } = yield* Server
          const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
          yield* Effect.gen(function*() {
            const db = yield* DbSession
            assert.deepStrictEqual(yield* db.query("select 1 as one"), [{ one: 1 }])
            const started = Date.now()
            const error = yield* Effect.flip(
              db.withConnection((c) => Effect.andThen(proxy.setSilent(true), c.query("select 2 as two")))
            )
            const elapsed = Date.now() - started
            yield* proxy.setSilent(false)
            assert.strictEqual(error._tag === "QueryFailed" && error.code, "STATEMENT_TIMEOUT", error.message)
            assert.isAtLeast(elapsed, statementTimeoutMillis + 1000 - 50)
            assert.isBelow(elapsed, statementTimeoutMillis + 1000 + 3000)
            // The silent connection was closed, not handed out again: the next statement gets a working one.
            assert.deepStrictEqual(yield* db.query("select 3 as three"), [{ three: 3 }])
          }).pipe(Effect.provide(session({
            url: proxy.url(cluster.url),
            applicationName: appName(`silent_${driver}_${poolClass}`),
            driver,
            poolClass,
            statementTimeout: `${statementTimeoutMillis} millis`
          })))
        }))
    })
  }
})
