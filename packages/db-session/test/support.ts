/** Shared fixtures for the real-server tests: one small cluster per file and an admin connection. */
import { Cluster } from "@resilience/local-postgres"
import { Context, Effect, Layer, Metric } from "effect"
import pg from "pg"
import type { DbConfig, InvalidTlsSetting } from "../src/index.ts"
import { DbSession } from "../src/index.ts"

/** Both drivers with both pool classes: every conformance test runs for each. */
export const matrix = [
  { driver: "pg", poolClass: "null" },
  { driver: "pg", poolClass: "queue" },
  { driver: "postgres", poolClass: "null" },
  { driver: "postgres", poolClass: "queue" }
] as const

/** Slots of the test cluster (`max_connections`, no reserved slots). */
export const maxConnections = 6

/** A small cluster plus one admin connection that stays open (it holds one of the slots). */
export class Server extends Context.Service<Server, {
  readonly cluster: Cluster.Cluster
  /** Runs a statement on the standing admin connection. */
  readonly admin: <Row>(sql: string, params?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>>
}>()("test/Server") {
  static readonly layer: Layer.Layer<Server, unknown> = Layer.effect(
    Server,
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections })
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: cluster.url })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end())
      )
      return Server.of({
        cluster,
        admin: <Row>(sql: string, params: ReadonlyArray<unknown> = []) =>
          Effect.promise(() => client.query(sql, [...params])).pipe(
            Effect.map((result) => result.rows as ReadonlyArray<Row>)
          )
      })
    })
  )
}

/** Backends on the server with this application_name (only those waiting on a lock, with `waitingOnLock`). */
export const backends = (
  applicationName: string,
  filter: { readonly waitingOnLock?: boolean } = {}
): Effect.Effect<number, never, Server> =>
  Effect.gen(function*() {
    const server = yield* Server
    const rows = yield* server.admin<{ n: number }>(
      "select count(*)::int as n from pg_stat_activity where application_name = $1"
        + (filter.waitingOnLock === true ? " and wait_event_type = 'Lock'" : ""),
      [applicationName]
    )
    return rows[0]?.n ?? -1
  })

let counter = 0
/** A unique application_name, so server-side counts belong to one test. */
export const appName = (label: string) => `dbs_${label}_${process.pid}_${++counter}`.slice(0, 60)

/** A session layer with test defaults. */
export const session = (
  options: Partial<DbConfig.Options> & { readonly url: string }
): Layer.Layer<DbSession, InvalidTlsSetting> =>
  DbSession.layer({
    connectTimeout: "2 seconds",
    poolClass: "null",
    poolSize: 4,
    driver: "pg",
    ...options
  })

/** Runs `effect` with a fresh metric registry, so gauges and counters belong to this test. */
export const freshMetrics = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, Metric.MetricRegistry, new Map())
