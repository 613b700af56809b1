/**
 * Benchmark (not a test): how long a tenant waits for its representations. 300 messages are posted through
 * the real API (its own process, `apps/api/src/main.ts`) with `@resilience/api-client`, each to its own session, so they enqueue 300
 * single-item `representation` units; one deriver with the production defaults (base 1 s, max 30 s, jitter
 * 0.5; startup jitter off), running in this process with the domain's handlers since before the first post,
 * drains them. Reports the time from the first post to the last representation, and from the last accepted
 * post to the last representation, for WORKERS 1 and 8 and both pool classes. Loopback only; bounded.
 *
 *   npm run bench -w @resilience/deriver-app
 *   BENCH_UNITS=300 npm run bench -w @resilience/deriver-app
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ApiClient } from "@resilience/api-client"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig } from "@resilience/deriver"
import { Domain } from "@resilience/domain"
import { Cluster } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { EntryPoint } from "@resilience/test-db"
import { Effect, Exit, Logger, References, Scope } from "effect"
import { FetchHttpClient } from "effect/http"

const units = Number(process.env.BENCH_UNITS ?? 300)
const clients = 10
const adminToken = "bench-admin-token-0123456789"
const now = () => performance.now()

/** Spawns the API on the schema and waits until it is ready (its migrations ran). */
const startApi = (url: string, schema: string) =>
  Effect.gen(function*() {
    const baseUrl = yield* EntryPoint.api({ url, schema, adminToken, env: { DB_POOL_CLASS: "queue" } })
    // a readiness wait is one long poll: a budget that does not run out
    const waiting = yield* ApiClient.make({
      baseUrl,
      maxAttempts: 100,
      maxDelay: "1 second",
      budget: { maxTokens: 1_000_000, ratio: 1 }
    }).pipe(Effect.orDie)
    yield* Effect.orDie(waiting.readyz)
    return yield* ApiClient.make({ baseUrl }).pipe(Effect.orDie)
  })

/** Posts one message to each of `units` sessions, `clients` at a time; returns when all are accepted. */
const postAll = (api: ApiClient.ApiClient, workspace: string, token: string) =>
  Effect.forEach(
    Array.from({ length: units }, (_, i) => i),
    (i) =>
      api.appendMessages({
        token,
        workspace,
        session: `s${i}`,
        messages: [{ peer: "alice", content: `message ${i}` }]
      }),
    { concurrency: clients, discard: true }
  ).pipe(Effect.orDie)

const run = (api: ApiClient.ApiClient, schemaName: string, workers: number, poolClass: "null" | "queue") =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(schemaName)
    const workspace = `w${workers}${poolClass}`
    const created = yield* Effect.orDie(api.createWorkspace({ adminToken, name: workspace }))
    const db = yield* DbSession
    const config = yield* Effect.orDie(DeriverConfig.make({ workers, pollingStartupJitterSeconds: 0 }))
    const scope = yield* Scope.make()
    yield* Scope.provide(Deriver.start({ schema, handlers: Domain.handlers(schema), config }), scope)
    const pending = db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")}
       WHERE NOT processed AND work_unit_key LIKE $1`,
      [`representation:${workspace}:%`]
    ).pipe(Effect.map((rows) => rows[0]!.n))
    const started = now()
    yield* postAll(api, workspace, created.token)
    const posted = now()
    const deadline = posted + 120_000
    while ((yield* pending) > 0 && now() < deadline) yield* Effect.sleep("5 millis")
    const drained = now()
    const left = yield* pending
    yield* Scope.close(scope, Exit.void)
    return {
      workers,
      poolClass,
      postSeconds: (posted - started) / 1000,
      firstPostToDrained: (drained - started) / 1000,
      lastPostToDrained: (drained - posted) / 1000,
      left
    }
  })

const program = Effect.gen(function*() {
  const cluster = yield* Cluster.start({ maxConnections: 100 })
  const schema = "drain"
  const api = yield* startApi(cluster.url, schema)
  const results = []
  for (const poolClass of ["queue", "null"] as const) {
    for (const workers of [1, 8]) {
      console.log(`draining ${units} single-item units posted through the API: WORKERS=${workers}, ${poolClass}…`)
      const session = DbSession.layer({
        url: cluster.url,
        connectTimeout: "5 seconds",
        poolClass,
        poolSize: 10,
        driver: "pg",
        applicationName: "bench-drain"
      })
      results.push(yield* run(api, schema, workers, poolClass).pipe(Effect.provide(session)))
    }
  }
  console.log(
    `\n${units} representation units posted through the API (${clients} concurrent clients), one deriver with the` +
      " production defaults (base 1 s, max 30 s), startup jitter off\n"
  )
  console.log("| DB_POOL_CLASS | WORKERS | posting took | first post → drained | last post → drained | left |")
  console.log("|---|---|---|---|---|---|")
  for (const r of results) {
    console.log(
      `| ${r.poolClass} | ${r.workers} | ${r.postSeconds.toFixed(2)} s | ${r.firstPostToDrained.toFixed(2)} s | ${
        r.lastPostToDrained.toFixed(2)
      } s | ${r.left} |`
    )
  }
})

NodeRuntime.runMain(
  Effect.scoped(program).pipe(
    Effect.provide(FetchHttpClient.layer),
    Effect.provide(Logger.layer([])),
    Effect.provideService(References.MinimumLogLevel, "Error")
  )
)
