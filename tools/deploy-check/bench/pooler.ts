/**
 * Benchmark (not a test): one deriver at the production defaults (base 1 s, max 30 s, jitter 0.5; startup jitter
 * off so the start is not measured), `DB_POOL_CLASS=null` (a new connection per checkout, the fleet's setting),
 * no-op handler, through PgBouncer configured by the shipped `deploy/pgbouncer/pgbouncer.ini` (transaction mode,
 * its pool sizes; plain auth) beside direct to PostgreSQL; units of 1 and of 10 items, WORKERS 1 and 8.
 *
 *   npm run bench -w @resilience/deploy-check
 *
 * BENCH_ITEMS: items per run (default 400); BENCH_RUN_SECONDS: the bound of one run (default 20; a run that does
 * not finish reports what it recorded in that time).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, Queue, QueueSchema } from "@resilience/deriver"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { PgBouncer } from "@resilience/test-db"
import { Console, Deferred, Effect, Exit, Logger, Scope } from "effect"
import { readFileSync } from "node:fs"

const items = Number(process.env["BENCH_ITEMS"] ?? 400)
const runSeconds = Number(process.env["BENCH_RUN_SECONDS"] ?? 20)
const now = () => performance.now()

const session = (url: string) =>
  DbSession.layer({ url, connectTimeout: "2 seconds", poolClass: "null", poolSize: 10, driver: "pg" })

let runs = 0
const throughput = (url: string, workers: number, unitSize: number) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_pooler_${runs++}`)
    const db = yield* DbSession
    yield* Migrator.run(schema, [QueueSchema.component])
    const units = Math.ceil(items / unitSize)
    yield* db.withConnection((c) =>
      Queue.enqueue(
        c,
        schema,
        Array.from({ length: items }, (_, i) => ({ workUnitKey: `unit-${i % units}`, taskType: "noop", payload: {} }))
      )
    )
    const config = yield* Effect.orDie(DeriverConfig.make({ workers, pollingStartupJitterSeconds: 0 }))
    // The handler says when the last item ran; the run ends then or at the bound, whichever comes first.
    const allHandled = yield* Deferred.make<void>()
    let handled = 0
    const noop = () => Effect.suspend(() => ++handled === items ? Deferred.succeed(allHandled, undefined) : Effect.void)
    const scope = yield* Scope.make()
    const started = now()
    yield* Scope.provide(Deriver.start({ schema, handlers: Handlers.make({ noop }), config }), scope)
    yield* Deferred.await(allHandled).pipe(Effect.timeoutOption(`${runSeconds} seconds`))
    const seconds = (now() - started) / 1000
    yield* Scope.close(scope, Exit.void)
    // what the deriver recorded (the handler may have run for an item whose completion was not yet written)
    const recorded = (yield* db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE processed`
    ))[0]!.n
    yield* db.query(`DROP SCHEMA ${SchemaName.quote(schema)} CASCADE`)
    return { recorded, seconds, units: Math.ceil(recorded / unitSize) }
  }).pipe(Effect.provide(session(url)))

const program = Effect.gen(function*() {
  const shipped = PgBouncer.parseIni(readFileSync(PgBouncer.shippedIni, "utf8")).get("pgbouncer")!
  const cluster = yield* Cluster.start({ maxConnections: 100 })
  const bouncer = yield* PgBouncer.start({
    upstream: cluster,
    maxClientConn: Number(shipped.get("max_client_conn")),
    poolSize: Number(shipped.get("default_pool_size"))
  })
  yield* Console.log(
    `one deriver, production defaults, DB_POOL_CLASS=null, pg driver, no-op handler, ${items} items per run (bound ${runSeconds} s)`
  )
  yield* Console.log(
    `PgBouncer: the shipped ini (pool_mode ${shipped.get("pool_mode")}, default_pool_size ${
      shipped.get("default_pool_size")
    }, query_wait_timeout ${shipped.get("query_wait_timeout")}), auth plain`
  )
  yield* Console.log("\n| path      | unit size | workers | items/s | units/s | recorded |")
  yield* Console.log("| --------- | --------: | ------: | ------: | ------: | -------: |")
  for (const unitSize of [1, 10]) {
    for (const workers of [1, 8]) {
      for (const [path, url] of [["direct", cluster.url], ["PgBouncer", bouncer.url]] as const) {
        const run = yield* throughput(url, workers, unitSize)
        yield* Console.log(
          `| ${path.padEnd(9)} | ${String(unitSize).padStart(9)} | ${String(workers).padStart(7)} | ${
            (run.recorded / run.seconds).toFixed(1).padStart(7)
          } | ${(run.units / run.seconds).toFixed(1).padStart(7)} | ${String(run.recorded).padStart(8)} |`
        )
      }
    }
  }
})

program.pipe(Effect.scoped, Effect.provide(Logger.layer([])), NodeRuntime.runMain)
