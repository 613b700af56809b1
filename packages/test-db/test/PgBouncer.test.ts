import { assert, describe, it } from "@effect/vitest"
import { Cluster, Orphans, Saturation } from "@resilience/local-postgres"
import { PgBouncer } from "@resilience/test-db"
import { Effect } from "effect"
import { readFileSync } from "node:fs"
import pg from "pg"

/** The server port a connection through `url` lands on. */
const serverPort = (url: string) =>
  Effect.acquireUseRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.query("SELECT current_setting('port') AS port")),
    (client) => Effect.promise(() => client.end())
  ).pipe(Effect.map((result) => Number(result.rows[0].port)))

const skip = PgBouncer.skipReason()

describe.skipIf(skip !== undefined)(`PgBouncer${skip === undefined ? "" : ` (skipped: ${skip})`}`, () => {
  it.live("refuses the (M+1)-th client with its own max_client_conn error", () =>
    Effect.gen(function*() {
      const upstream = yield* Cluster.start({ maxConnections: 20 })
      const bouncer = yield* PgBouncer.start({ upstream, maxClientConn: 2, poolSize: 2 })
      assert.strictEqual(yield* serverPort(bouncer.url), upstream.port)
      const { held, refusal } = yield* Saturation.hold(bouncer.url)
      assert.strictEqual(held, 2)
      assert.strictEqual(refusal.code, "08P01")
      assert.match(refusal.message, /no more connections allowed \(max_client_conn\)/)
    }).pipe(Effect.scoped))

  it.live("starts from the shipped deploy/pgbouncer/pgbouncer.ini: its settings, the test's sizes", () =>
    Effect.gen(function*() {
      const upstream = yield* Cluster.start({ maxConnections: 5 })
      const bouncer = yield* PgBouncer.start({
        upstream,
        maxClientConn: 3,
        poolSize: 1,
        settings: { admin_users: upstream.user }
      })
      const rows = yield* Effect.acquireUseRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: bouncer.url.replace(/\/postgres$/, "/pgbouncer") })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.query<{ key: string; value: string }>("SHOW CONFIG")),
        (client) => Effect.promise(() => client.end())
      )
      const running = new Map(rows.rows.map((row) => [row.key, row.value]))
      const shipped = PgBouncer.parseIni(readFileSync(PgBouncer.shippedIni, "utf8")).get("pgbouncer")!
      for (const key of ["pool_mode", "query_wait_timeout", "server_login_retry", "reserve_pool_size"]) {
        assert.strictEqual(running.get(key), shipped.get(key), key)
      }
      assert.strictEqual(running.get("pool_mode"), "transaction")
      assert.strictEqual(running.get("max_client_conn"), "3")
      assert.strictEqual(running.get("default_pool_size"), "1")
    }).pipe(Effect.scoped))

  it.effect("stops PgBouncer and deletes its files when the scope closes", () =>
    Effect.gen(function*() {
      const upstream = yield* Cluster.start({ maxConnections: 5 })
      const bouncer = yield* Effect.scoped(PgBouncer.start({ upstream, maxClientConn: 2, poolSize: 1 }))
      assert.isFalse(Orphans.isAlive(bouncer.pid))
    }).pipe(Effect.scoped))
})
