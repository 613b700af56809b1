import { assert, describe, it } from "@effect/vitest"
import { Cluster, Orphans } from "@resilience/local-postgres"
import { PgBouncer } from "@resilience/test-db"
import { Effect } from "effect"
import pg from "pg"

/** Opens a connection; yields the client, or the server's error when it refuses. */
const connect = (url: string) =>
  Effect.tryPromise({
    try: async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 })
      client.on("error", () => undefined)
      await client.connect()
      return client
    },
    catch: (error) => error as Error & { code?: string }
  })

const holdConnections = (url: string, count: number) =>
  Effect.acquireRelease(
    Effect.forEach(Array.from({ length: count }), () => connect(url).pipe(Effect.orDie)),
    (clients) => Effect.promise(() => Promise.all(clients.map((client) => client.end())))
  )

const skip = PgBouncer.skipReason()

describe.skipIf(skip !== undefined)(`PgBouncer${skip === undefined ? "" : ` (skipped: ${skip})`}`, () => {
  it.effect("refuses the (M+1)-th client with its own max_client_conn error", () =>
    Effect.gen(function*() {
      const upstream = yield* Cluster.start({ maxConnections: 20 })
      const bouncer = yield* PgBouncer.start({ upstream, maxClientConn: 2, poolSize: 2 })
      const [first] = yield* holdConnections(bouncer.url, 2)
      const through = yield* Effect.promise(() => first!.query("SELECT current_setting('port') AS port"))
      assert.strictEqual(Number(through.rows[0].port), upstream.port)
      const refused = yield* Effect.flip(connect(bouncer.url))
      assert.strictEqual(refused.code, "08P01")
      assert.match(refused.message, /no more connections allowed \(max_client_conn\)/)
    }).pipe(Effect.scoped))

  it.effect("stops PgBouncer and deletes its files when the scope closes", () =>
    Effect.gen(function*() {
      const upstream = yield* Cluster.start({ maxConnections: 5 })
      const bouncer = yield* Effect.scoped(PgBouncer.start({ upstream, maxClientConn: 2, poolSize: 1 }))
      assert.isFalse(Orphans.isAlive(bouncer.pid))
    }).pipe(Effect.scoped))
})
