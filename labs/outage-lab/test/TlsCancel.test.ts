/**
 * A query cancel through the lab's TLS pooler, under both drivers: a statement that outlives db-session's
 * client-side deadline fails with `STATEMENT_TIMEOUT` and db-session sends a CancelRequest (a separate short
 * connection to the pooler, as the deriver's and the API's timeouts do); the statement must then stop on the
 * server. PgBouncer with `client_tls_sslmode = require`, and stunnel (its `pgsql` protocol) in front of a plain
 * PgBouncer. The server's own `statement_timeout` does not reach the backend here (PgBouncer's shipped
 * `ignore_startup_parameters` drops it), so only the CancelRequest can stop the statement.
 */
import { assert, describe, it } from "@effect/vitest"
import { DbSession, QueryFailed } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { PgBouncer } from "@resilience/test-db"
import { Effect } from "effect"
import * as Pooler from "../src/Pooler.ts"
import { defaults, type Tls } from "../src/Settings.ts"

/** Backends running the test's sleep right now, seen on the cluster directly. */
const sleeping = (clusterUrl: string, marker: string) =>
  Effect.scoped(
    Effect.flatMap(Pooler.client(clusterUrl, "lab-test-observer"), (c) =>
      Effect.promise(async () =>
        (await c.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where state = 'active' and pid <> pg_backend_pid() and query like $1",
          [`%${marker}%`]
        )).rows[0]?.n ?? -1
      ))
  )

/** Polls until no backend runs the sleep, at most `millis`; returns the last count. */
const gone = (clusterUrl: string, marker: string, millis: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + millis
    for (;;) {
      const n = yield* sleeping(clusterUrl, marker)
      if (n === 0 || Date.now() > deadline) return n
      yield* Effect.sleep(50)
    }
  })

const cases: ReadonlyArray<{ readonly tls: Tls; readonly driver: "pg" | "postgres" }> = [
  { tls: "none", driver: "pg" },
  { tls: "pgbouncer", driver: "pg" },
  { tls: "pgbouncer", driver: "postgres" },
  { tls: "stunnel", driver: "pg" },
  { tls: "stunnel", driver: "postgres" }
]

describe.skipIf(PgBouncer.skipReason() !== undefined)("a query cancel through the lab's TLS pooler", () => {
  for (const { tls, driver } of cases) {
    it.live.skipIf(tls === "stunnel" && Pooler.stunnelSkipReason() !== undefined)(
      `${tls}, ${driver}: the statement past its deadline is cancelled on the server`,
      () =>
        Effect.scoped(Effect.gen(function*() {
          const cluster = yield* Cluster.start({ maxConnections: 10 })
          const settings = { ...defaults, tls, maxClientConn: 20, poolSize: 2 }
          const front = yield* Pooler.pooler(cluster, settings, yield* Pooler.certificatesFor(settings))
          assert.isTrue(tls === "none" || front.url.endsWith("?sslmode=require"), front.url)
          const marker = `cancel_${tls}_${driver}`
          const error = yield* Effect.gen(function*() {
            const db = yield* DbSession
            // the session works over TLS at all
            assert.deepStrictEqual(yield* db.query("select 1 as one"), [{ one: 1 }])
            return yield* Effect.flip(db.query(`select pg_sleep(20), '${marker}'`))
          }).pipe(Effect.provide(DbSession.layer({
            url: front.url,
            driver,
            poolClass: "null",
            poolSize: 1,
            connectTimeout: "5 seconds",
            statementTimeout: "300 millis",
            applicationName: "lab-test-cancel"
          })))
          assert.instanceOf(error, QueryFailed, `${error._tag}: ${error.message}`)
          assert.strictEqual(error.code, "STATEMENT_TIMEOUT", error.message)
          // the CancelRequest reached the backend through the pooler: the 20 s sleep stops within seconds
          assert.strictEqual(yield* gone(cluster.url, marker, 5000), 0, "the statement still runs on the server")
        })),
      { timeout: 60_000 }
    )
  }
})
