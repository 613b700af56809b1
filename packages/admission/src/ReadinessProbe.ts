/**
 * The readiness probe (`SELECT 1`) that costs the database at most one attempt at a time: the check goes
 * through the gate, and is single-flight with a short cache (Effect's `cachedWithTTL`), so a flood of probes shares one check, and
 * probes within `cacheMillis` of its end get its answer (ready or not) without touching the database.
 *
 * @since 0.1.0
 */
import { type DbError, DbSession } from "@resilience/db-session"
import { Config, Context, Effect, Layer, Schema } from "effect"
import * as Gate from "./Gate.ts"
import type * as Shed from "./Shed.ts"

/**
 * The readiness probe as a service.
 *
 * @since 0.2.0
 * @category services
 */
export class ReadinessProbe extends Context.Service<ReadinessProbe, {
  /** Succeeds when the database answered `SELECT 1` (now, or within the cache window). */
  readonly check: Effect.Effect<void, DbError | Shed.Shed>
}>()("@resilience/admission/ReadinessProbe") {}

/**
 * Default cache window: 1 s (a probe every second at most reaches the database, whatever the probe rate).
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultCacheMillis = 1_000

/**
 * Single-flight with a cache of `cacheMillis` (0: single-flight only) around `check`, run through the gate
 * in context. An interrupted check is not cached; the next probe starts a new one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <E, R>(
  check: Effect.Effect<unknown, E, R>,
  options: { readonly cacheMillis: number }
): Effect.Effect<Effect.Effect<void, E | Shed.Shed, R>, never, Gate.Gate> =>
  Effect.gen(function*() {
    const gate = yield* Gate.Gate
    return yield* Effect.cachedWithTTL(Effect.asVoid(gate.run(check)), options.cacheMillis)
  })

/**
 * The database readiness check (`SELECT 1` on one checkout) with `cacheMillis` (default {@link defaultCacheMillis}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: { readonly cacheMillis?: number | undefined }): Layer.Layer<
  ReadinessProbe,
  never,
  Gate.Gate | DbSession
> =>
  Layer.effect(
    ReadinessProbe,
    Effect.gen(function*() {
      const db = yield* DbSession
      const check = yield* make(db.query("SELECT 1"), { cacheMillis: options?.cacheMillis ?? defaultCacheMillis })
      return ReadinessProbe.of({ check })
    })
  )

const CacheMillis = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 60_000 }))

/**
 * The cache window from the environment variable `name` gives (this repository's API passes
 * `API_READINESS_CACHE_MILLIS`): default 1000, an integer in [0, 60000].
 *
 * @since 0.2.0
 * @category config
 */
export const cacheMillisConfig = (name: string): Config.Config<number> =>
  Config.schema(CacheMillis, name).pipe(Config.withDefault(defaultCacheMillis))

/**
 * {@link layer} with the cache window from the environment variable `name` gives ({@link cacheMillisConfig}).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerConfig = (name: string): Layer.Layer<ReadinessProbe, Config.ConfigError, Gate.Gate | DbSession> =>
  Layer.unwrap(
    Effect.gen(function*() {
      return layer({ cacheMillis: yield* cacheMillisConfig(name) })
    })
  )
