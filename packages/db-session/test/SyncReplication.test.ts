/**
 * Commits under synchronous replication, for both drivers, against a real server whose
 * `synchronous_standby_names` names a standby that never connects (`nosuch`): every commit waits for it.
 *
 * - A cancel request during that wait (an operator's `pg_cancel_backend`, a watchdog that cancels long
 *   statements) ends it with PostgreSQL's WARNING "canceling wait for synchronous replication …" and a COMMIT
 *   that succeeds: the session fails the transaction with `QueryFailed` 01000, `ReplicationUnconfirmed`
 *   (transient: an unknown outcome), and the row is there, committed locally.
 * - `SET LOCAL statement_timeout` does not end the wait (the server stops its timer before it commits): the
 *   session's own deadline does (`STATEMENT_TIMEOUT`, transient), and the row is committed locally as well.
 * - Any other warning leaves the statement's success alone.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Eventually } from "@resilience/test-db"
import { Effect, Exit, Fiber } from "effect"
import { Classify, DbSession, QueryFailed } from "../src/index.ts"
import { appName, Server, session } from "./support.ts"

const statementTimeoutMillis = 300

/** Backends of `applicationName` waiting for the synchronous standby right now, by pid. */
const waitingForStandby = (applicationName: string) =>
  Effect.gen(function*() {
    const server = yield* Server
    return yield* server.admin<{ pid: number }>(
      "select pid from pg_stat_activity where application_name = $1 and wait_event = 'SyncRep'",
      [applicationName]
    )
  })

/** How many rows of `id` the primary has. */
const stored = (id: string) =>
  Effect.gen(function*() {
    const server = yield* Server
    const rows = yield* server.admin<{ n: number }>("select count(*)::int as n from sync_commits where id = $1", [id])
    return rows[0]?.n ?? -1
  })

layer(Server.layer, { excludeTestServices: true, timeout: "120 seconds" })("Synchronous replication", (it) => {
  it.effect("setup: every commit of the sessions under test waits for a standby that does not exist", () =>
    Effect.gen(function*() {
      const server = yield* Server
      // The admin connection's own writes do not wait; the test cluster runs with synchronous_commit=off on its
      // command line, which a database's setting overrides for the sessions under test.
      yield* server.admin("set synchronous_commit = local")
      yield* server.admin("create table if not exists sync_commits (id text primary key)")
      yield* server.admin("alter system set synchronous_standby_names = 'nosuch'")
      yield* server.admin("select pg_reload_conf()")
      yield* server.admin("alter database postgres set synchronous_commit = on")
    }))

  for (const driver of ["pg", "postgres"] as const) {
    describe(driver, () => {
      it.effect("a cancelled wait for the standby at COMMIT: ReplicationUnconfirmed, committed locally", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const applicationName = appName(`sync_cancel_${driver}`)
          const id = `cancel-${driver}`
          const exit = yield* Effect.gen(function*() {
            const db = yield* DbSession
            const fiber = yield* Effect.forkChild(
              db.transaction((c) => c.query("insert into sync_commits (id) values ($1)", [id]))
            )
            const waiting = yield* Eventually.satisfying(
              "the COMMIT waiting for the standby",
              waitingForStandby(applicationName),
              (rows) => rows.length === 1
            )
            assert.lengthOf(waiting, 1, "the COMMIT waits for the standby")
            yield* server.admin("select pg_cancel_backend($1)", [waiting[0]?.pid])
            return yield* Fiber.await(fiber)
          }).pipe(Effect.provide(session({ url: server.cluster.url, applicationName, driver })))
          assert.isTrue(Exit.isFailure(exit), "the transaction must not succeed")
          const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
          assert.instanceOf(error, QueryFailed)
          assert.strictEqual(error?.code, "01000")
          assert.match(error?.message ?? "", /^canceling wait for synchronous replication due to user request: /)
          assert.match(error?.message ?? "", /has already committed locally, but might not have been replicated/)
          assert.deepStrictEqual(Classify.conditionOf(error), { meaning: "transient", name: "ReplicationUnconfirmed" })
          assert.isFalse(Classify.isCancelled(error), "the work was done, not undone")
          // The outcome is unknown, not "nothing happened": the row is on the primary.
          assert.strictEqual(yield* stored(id), 1)
        }))

      it.effect("SET LOCAL statement_timeout does not end the wait; the session's deadline does", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const applicationName = appName(`sync_deadline_${driver}`)
          const id = `deadline-${driver}`
          const started = Date.now()
          const error = yield* Effect.flip(
            DbSession.use((db) => db.transaction((c) => c.query("insert into sync_commits (id) values ($1)", [id])))
          ).pipe(
            Effect.provide(session({
              url: server.cluster.url,
              applicationName,
              driver,
              statementTimeout: `${statementTimeoutMillis} millis`
            }))
          )
          const elapsed = Date.now() - started
          assert.instanceOf(error, QueryFailed, `${error._tag}: ${error.message}`)
          assert.strictEqual(error.code, "STATEMENT_TIMEOUT")
          assert.isTrue(Classify.isTransient(error))
          // Not at the server's 300 ms: at the client's bound (the statement timeout + 1 s).
          assert.isAtLeast(elapsed, statementTimeoutMillis + 1000 - 50)
          // The session's CancelRequest ended the wait on the server: the row is committed locally.
          assert.strictEqual(yield* Eventually.satisfying("the row stored", stored(id), (n) => n === 1), 1)
          assert.lengthOf(
            yield* Eventually.satisfying(
              "no COMMIT waiting for the standby",
              waitingForStandby(applicationName),
              (rows) => rows.length === 0
            ),
            0
          )
        }))

      it.effect("any other warning leaves the statement's success alone", () =>
        Effect.gen(function*() {
          const server = yield* Server
          const rows = yield* DbSession.use((db) =>
            db.withConnection((c) =>
              Effect.andThen(
                c.query("do $$ begin raise warning 'canceling nothing: a warning of our own'; end $$"),
                c.query<{ one: number }>("select 1 as one")
              )
            )
          ).pipe(Effect.provide(session({ url: server.cluster.url, applicationName: appName("sync_warn"), driver })))
          assert.deepStrictEqual(rows, [{ one: 1 }])
        }))
    })
  }
})
