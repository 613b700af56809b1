/**
 * The fleet: N real deriver loops (`Deriver.start` from `@resilience/deriver`), one schema each, every one with
 * the production poll schedule and the policy's jitter, each checkout a fresh connection through PgBouncer.
 * Queues are empty: each poll is the claim query (and, when due, the stale cleanup) and nothing else, as in
 * the incident's herd. A mass restart stops every loop and starts them all again in the same instant.
 */
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, Migrator, QueueSchema, SchemaName } from "@resilience/deriver"
import { Effect, Fiber, Layer, References, Scope } from "effect"
import * as Counters from "./Counters.ts"
import * as Sessions from "./Sessions.ts"
import type { Settings } from "./Settings.ts"

/** The schema of deriver `i`. */
export const schemaOf = (i: number): SchemaName.SchemaName => SchemaName.makeUnsafe(`lab_${String(i).padStart(4, "0")}`)

/** Creates every deriver's queue tables, straight on the cluster (not through the pooler). */
export const prepare = (clusterUrl: string, derivers: number) =>
  Effect.forEach(
    Array.from({ length: derivers }, (_, i) => schemaOf(i)),
    (schema) => Migrator.run(schema, [QueueSchema.component]),
    { concurrency: 2, discard: true }
  ).pipe(
    Effect.provideService(References.MinimumLogLevel, "Warn"),
    Effect.provide(DbSession.layer({
      url: clusterUrl,
      connectTimeout: "10 seconds",
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "lab-prepare"
    }))
  )

/** The deriver settings of a policy: production defaults, the policy's jitter, a short shutdown. */
export const config = (settings: Settings): Effect.Effect<DeriverConfig.DeriverConfig, DeriverConfig.Invalid> => {
  const jitter = Sessions.jitters(settings.policy)
  return DeriverConfig.make({
    workers: 1,
    pollingSleepIntervalSeconds: settings.baseIntervalSeconds,
    pollingSleepMaxIntervalSeconds: settings.maxIntervalSeconds,
    pollingJitterRatio: jitter ? 0.5 : 0,
    pollingStartupJitterSeconds: jitter ? settings.maxIntervalSeconds : 0,
    shutdownGraceSeconds: 0
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
    const all = Effect.scoped(
      Effect.gen(function*() {
        for (let i = 0; i < settings.derivers; i++) {
          yield* Deriver.start({ schema: schemaOf(i), handlers: Handlers.empty, config: deriverConfig, observer })
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
