/**
 * The real-cluster herd benchmark: hundreds of real deriver loops from `@resilience/deriver` (fresh
 * connection per checkout, `DB_POOL_CLASS=null`), each serving its own schema, started at the same instant
 * against a real PostgreSQL, first with jitter off and then with jitter on, while a 10 Hz
 * `pg_stat_activity` sampler records active claim queries and connections.
 *
 * @since 0.1.0
 */
import { DbSession, type InvalidTlsSetting } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, QueueSchema } from "@resilience/deriver"
import type { InvalidParameter } from "@resilience/parameters"
import { Migrator, SchemaName } from "@resilience/schema"
import { Clock, Console, Effect, Fiber, Layer, References } from "effect"
import type pg from "pg"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import * as ActivitySampler from "../src/ActivitySampler.ts"

/**
 * Benchmark settings.
 *
 * @since 0.1.0
 */
export interface Options {
  readonly url: string
  readonly derivers: number
  readonly phaseSeconds: number
  readonly baseIntervalSeconds: number
  readonly maxIntervalSeconds: number
  readonly jitterRatio: number
  readonly connectTimeoutSeconds: number
  readonly samplePeriodMillis: number
}

/**
 * One phase's record: per sample, active claims and connections of the phase's derivers; errors counted from
 * the loops' own `Polled` events.
 *
 * @since 0.1.0
 */
export interface Phase {
  readonly name: string
  readonly jitter: boolean
  readonly samples: ReadonlyArray<{ readonly second: number; readonly claims: number; readonly connections: number }>
  readonly polls: number
  readonly connectionErrors: number
  readonly claimsPeak: number
  readonly claimsMean: number
  readonly connectionsPeak: number
  readonly connectionsMean: number
}

/** The schema of deriver `i`. */
const schemaOf = (i: number) => SchemaName.makeUnsafe(`herd_${String(i).padStart(4, "0")}`)

/**
 * Creates every deriver's schema (queue tables) through one session.
 *
 * @since 0.1.0
 */
export const prepare = (options: Options) =>
  Effect.forEach(
    Array.from({ length: options.derivers }, (_, i) => schemaOf(i)),
    (schema) => Migrator.run(schema, [QueueSchema.component]),
    { concurrency: 4, discard: true }
  ).pipe(
    Effect.provideService(References.MinimumLogLevel, "Warn"),
    Effect.provide(DbSession.layer({
      url: options.url,
      connectTimeout: "10 seconds",
      poolClass: "queue",
      poolSize: 4,
      driver: "pg",
      applicationName: "fleet-sim-prepare"
    }))
  )

/**
 * Runs one phase: all derivers start at the same instant, run for `phaseSeconds`, and shut down.
 *
 * @since 0.1.0
 */
export const phase = (
  options: Options,
  jitter: boolean,
  client: pg.Client
): Effect.Effect<Phase, InvalidParameter.InvalidParameter | DeriverConfig.Invalid | InvalidTlsSetting> =>
  Effect.gen(function*() {
    const name = jitter ? "jitter on" : "jitter off"
    const application = jitter ? "herd-jitter-on" : "herd-jitter-off"
    const config = yield* DeriverConfig.make({
      workers: 1,
      pollingSleepIntervalSeconds: options.baseIntervalSeconds,
      pollingSleepMaxIntervalSeconds: options.maxIntervalSeconds,
      pollingJitterRatio: jitter ? options.jitterRatio : 0,
      pollingStartupJitterSeconds: jitter ? options.maxIntervalSeconds : 0,
      staleWorkUnitCleanupIntervalSeconds: 3600
    })
    let polls = 0
    let connectionErrors = 0
    const samples: Array<{ second: number; claims: number; connections: number }> = []
    const start = yield* Clock.currentTimeMillis
    const sampler = yield* Effect.forkChild(
      ActivitySampler.run(client, options.samplePeriodMillis, (sample) =>
        Effect.sync(() => {
          const row = sample.byApplication.get(application)
          samples.push({
            second: (sample.atMillis - start) / 1000,
            claims: row?.claims ?? 0,
            connections: row?.connections ?? 0
          })
        })).pipe(Effect.ignore)
    )
    const observer = (event: Parameters<NonNullable<Deriver.Options<never>["observer"]>>[0]) =>
      Effect.sync(() => {
        if (event._tag !== "Polled") return
        polls++
        if (event.outcome === "error") connectionErrors++
      })
    yield* Console.log(`${name}: starting ${options.derivers} derivers at the same instant`)
    yield* Effect.scoped(
      Effect.gen(function*() {
        for (let i = 0; i < options.derivers; i++) {
          yield* Deriver.start({ schema: schemaOf(i), handlers: Handlers.empty, config, observer })
        }
        yield* Effect.sleep(`${options.phaseSeconds} seconds`)
      })
    ).pipe(
      Effect.provide(
        Layer.fresh(DbSession.layer({
          url: options.url,
          connectTimeout: `${options.connectTimeoutSeconds} seconds`,
          poolClass: "null",
          poolSize: 1,
          driver: "pg",
          applicationName: application
        }))
      ),
      // hundreds of loops log every failed poll; the figures below count them instead
      Effect.provideService(References.MinimumLogLevel, "Error")
    )
    yield* Fiber.interrupt(sampler)
    const within = samples.filter((s) => s.second <= options.phaseSeconds)
    const result: Phase = {
      name,
      jitter,
      samples: within,
      polls,
      connectionErrors,
      claimsPeak: Math.max(0, ...within.map((s) => s.claims)),
      claimsMean: Stats.mean(within.map((s) => s.claims)),
      connectionsPeak: Math.max(0, ...within.map((s) => s.connections)),
      connectionsMean: Stats.mean(within.map((s) => s.connections))
    }
    return result
  })
