/**
 * The fleet: N real deriver loops (`Deriver.start` from `@resilience/deriver`), one schema each, every one with
 * the production poll schedule and the policy's jitter, each checkout a fresh connection through PgBouncer.
 * Queues are empty: each poll is the claim query (and, when due, the stale cleanup) and nothing else, as in
 * the incident's herd. A mass restart stops every loop and starts them all again in the same instant.
 */
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, QueueSchema } from "@resilience/deriver"
import { Domain, Workspaces } from "@resilience/domain"
import { Migrator, SchemaName } from "@resilience/schema"
import { Effect, Fiber, Layer, References, Scope } from "effect"
import * as Counters from "./Counters.ts"
import * as Sessions from "./Sessions.ts"
import { overloadAware, schemaCount, type Settings } from "./Settings.ts"

/** The schema of the `i`th schema (deriver `i` serves schema `i mod schemas`). */
export const schemaOf = (i: number): SchemaName.SchemaName => SchemaName.makeUnsafe(`lab_${String(i).padStart(4, "0")}`)

/** The workspace of `--writes` (in schema 0). */
export const workspace = "lab"

/** The domain (queue + domain tables) and the workspace of `--writes`, in schema 0. */
const domain = (schema: SchemaName.SchemaName) =>
  Effect.andThen(Domain.migrate(schema), Effect.asVoid(Effect.orDie(Workspaces.create(schema, workspace))))

/**
 * Writes `rows` processed items into a schema's queue and drops its partial indexes of unprocessed items, so
 * that every claim scans the whole history (then refreshes the planner's statistics).
 */
const thrashable = (schema: SchemaName.SchemaName, rows: number) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const queue = SchemaName.qualify(schema, "queue")
    yield* db.query(
      `INSERT INTO ${queue} (work_unit_key, task_type, processed)
       SELECT 'history-' || (g % 1000), 'noop', true FROM generate_series(1, $1) g`,
      [rows]
    )
    yield* db.query(`DROP INDEX ${SchemaName.qualify(schema, "queue_unprocessed_idx")}`)
    yield* db.query(`DROP INDEX ${SchemaName.qualify(schema, "queue_pending_id_idx")}`)
    yield* db.query(`ANALYZE ${queue}`)
  })

/**
 * Creates every schema's queue tables, straight on the cluster (not through the pooler), with `history`
 * processed rows each (and no partial claim indexes) when asked; with `writes`, schema 0 also gets the domain's
 * tables and the workspace the API traffic writes to.
 */
export const prepare = (clusterUrl: string, settings: Settings) =>
  Effect.forEach(
    Array.from({ length: schemaCount(settings) }, (_, i) => schemaOf(i)),
    (schema, i) =>
      Effect.andThen(
        settings.writes && i === 0 ? domain(schema) : Migrator.run(schema, [QueueSchema.component]),
        settings.history > 0 ? thrashable(schema, settings.history) : Effect.void
      ),
    { concurrency: 2, discard: true }
  ).pipe(
    Effect.provideService(References.MinimumLogLevel, "Warn"),
    Effect.provide(DbSession.layer({
      url: clusterUrl,
      connectTimeout: "10 seconds",
      statementTimeout: "10 minutes",
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "lab-prepare"
    }))
  )

/**
 * The deriver settings of a policy: production defaults, the policy's jitter, a short shutdown, the overload
 * signals and checkout gate under `adaptive` only (`DERIVER_OVERLOAD_ENABLED`), the run's claim timeout.
 */
export const config = (settings: Settings): Effect.Effect<DeriverConfig.DeriverConfig, DeriverConfig.Invalid> => {
  const jitter = Sessions.jitters(settings.policy)
  return DeriverConfig.make({
    workers: 1,
    pollingSleepIntervalSeconds: settings.baseIntervalSeconds,
    pollingSleepMaxIntervalSeconds: settings.maxIntervalSeconds,
    pollingJitterRatio: jitter ? 0.5 : 0,
    pollingStartupJitterSeconds: jitter ? settings.maxIntervalSeconds : 0,
    shutdownGraceSeconds: 0,
    overloadEnabled: overloadAware(settings.policy),
    claimTimeoutSeconds: settings.claimTimeoutSeconds
  })
}

/** A running fleet that can be restarted. */
export interface Fleet {
  /** Stops every loop, then starts every loop again at once. */
  readonly restart: Effect.Effect<void>
}

/** Starts the fleet in the current scope; it stops when the scope closes. */
export const start = (
  settings: Settings,
  url: string,
  counters: Counters.Counters
): Effect.Effect<Fleet, DeriverConfig.Invalid, Scope.Scope> =>
  Effect.gen(function*() {
    const deriverConfig = yield* config(settings)
    const observer = (event: Parameters<NonNullable<Deriver.Options<never>["observer"]>>[0]) =>
      Effect.sync(() => {
        if (event._tag === "Polled") Counters.bump(counters.polls, event.outcome)
      })
    const session = Sessions.layer({
      url,
      policy: settings.policy,
      role: "deriver",
      counters,
      connectTimeoutSeconds: settings.connectTimeoutSeconds
    })
    const schemas = schemaCount(settings)
    const all = Effect.scoped(
      Effect.gen(function*() {
        for (let i = 0; i < settings.derivers; i++) {
          const schema = schemaOf(i % schemas)
          yield* Deriver.start({
            schema,
            handlers: settings.writes && i % schemas === 0 ? Domain.handlers(schema) : Handlers.empty,
            config: deriverConfig,
            observer
          })
        }
        return yield* Effect.never
      })
    ).pipe(
      Effect.provide(Layer.fresh(session)),
      // hundreds of loops log every failed poll; the counters count them instead
      Effect.provideService(References.MinimumLogLevel, "None")
    )
    let running = yield* Effect.forkScoped(all)
    return {
      restart: Effect.gen(function*() {
        yield* Fiber.interrupt(running)
        running = yield* Effect.forkScoped(all)
      }).pipe(Effect.provideService(Scope.Scope, yield* Effect.scope))
    } satisfies Fleet
  })
