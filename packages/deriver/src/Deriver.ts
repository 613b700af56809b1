/**
 * The deriver: the {@link PollLoop} over the queue of one tenant schema. Claims units with the queue's SQL,
 * drains each in id order through the {@link Handlers} registry, marks items processed (or with their
 * error), bumps the heartbeat, backs off on database failures, and releases its ownership rows on shutdown.
 * Every database access is one checkout through `DbSession` (a single connection attempt).
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import { PollBackoff } from "@resilience/jitter"
import { Clock, Duration, Effect, Layer, Metric, Random } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import type * as DeriverConfig from "./DeriverConfig.ts"
import * as DeriverMetrics from "./DeriverMetrics.ts"
import * as Failures from "./Failures.ts"
import * as Handlers from "./Handlers.ts"
import * as PollLoop from "./PollLoop.ts"
import * as Queue from "./Queue.ts"
import type * as SchemaName from "./SchemaName.ts"

/**
 * What a deriver needs: the schema it serves, its handlers and its settings.
 *
 * @since 0.1.0
 */
export interface Options<R> {
  readonly schema: SchemaName.SchemaName
  readonly handlers: Handlers.Handlers<R>
  readonly config: DeriverConfig.DeriverConfig
  /** The owner token written into ownership rows; default: `host:pid:uuid`, unique per deriver. */
  readonly owner?: string | undefined
  /** Observes scheduling events (tests, benchmarks). */
  readonly observer?: PollLoop.Options["observer"]
}

/**
 * A running deriver.
 *
 * @since 0.1.0
 */
export interface Deriver extends PollLoop.PollLoop {
  readonly schema: SchemaName.SchemaName
  readonly owner: string
}

type ItemResult = "done" | "database" | "lost"

/**
 * Starts a deriver in the current scope. Closing the scope (e.g. on SIGTERM) shuts it down gracefully:
 * no new claims, in-flight units finish within the grace period, then ownership rows are released.
 *
 * @since 0.1.0
 */
export const start = <R>(options: Options<R>): Effect.Effect<Deriver, never, DbSession | R | Scope.Scope> =>
  Effect.gen(function*() {
    const session = yield* DbSession
    const { config, handlers, schema } = options
    const owner = options.owner ?? (yield* Effect.sync(() => `${hostname()}:${process.pid}:${randomUUID()}`))
    const staleSeconds = config.staleTimeoutMillis / 1000
    // Workers back off a failing database with the poll schedule's own settings (jittered, capped).
    const workerBackoff: PollBackoff.Settings = { ...config.backoff, enabled: true }

    const logDatabaseFailure = (message: string, error: DbError, annotations: Record<string, unknown> = {}) => {
      const log = error._tag === "DatabaseUnavailable" ? Effect.logWarning : Effect.logError
      return log(message).pipe(
        Effect.annotateLogs({
          schema,
          ...annotations,
          error: error._tag,
          ...(error._tag === "DatabaseUnavailable" ? { reason: error.reason } : {}),
          code: error.code ?? null,
          detail: error.message
        })
      )
    }

    const poll = (limit: number, cleanup: boolean) =>
      session.withConnection((connection) =>
        Effect.gen(function*() {
          if (cleanup) {
            const freed = yield* Queue.cleanupStale(connection, schema, staleSeconds)
            if (freed.length > 0) {
              yield* Metric.update(DeriverMetrics.staleUnitsReleased, freed.length)
              yield* Effect.logWarning("released stale work units").pipe(Effect.annotateLogs({ schema, units: freed }))
            }
          }
          return yield* Queue.claim(connection, schema, limit, owner)
        })
      ).pipe(Effect.tapError((error) => logDatabaseFailure("poll failed", error)))

    const sleepAfterFailure = (state: PollBackoff.State) =>
      Effect.gen(function*() {
        const u = workerBackoff.ratio === 0 ? 0 : yield* Random.next
        yield* Effect.sleep(Duration.millis(PollBackoff.sleepFrom(state, workerBackoff, u)))
        return PollBackoff.step(state, workerBackoff)
      })

    /**
     * Keeps a unit's ownership row fresh while one of its items is being handled, so a handler that runs
     * longer than the stale timeout does not lose its unit to another instance: a heartbeat every third of
     * the timeout, each one checkout; a failed beat is logged and the next one tries again at its time.
     */
    const keepAlive = (unit: string): Effect.Effect<never> =>
      Effect.forever(
        Effect.sleep(Duration.millis(config.staleTimeoutMillis / 3)).pipe(
          Effect.andThen(session.withConnection((connection) => Queue.heartbeat(connection, schema, unit, owner))),
          Effect.catch((error) => logDatabaseFailure("could not renew the unit's ownership", error, { unit }))
        )
      )

    const processItem = (item: Queue.Item): Effect.Effect<ItemResult, never, R> =>
      Effect.gen(function*() {
        const handler = Handlers.get(handlers, item.taskType)
        const outcome: { readonly failed: string | undefined } | { readonly database: unknown } = handler === undefined
          ? { failed: `no handler registered for task type ${JSON.stringify(item.taskType)}` }
          : yield* Effect.raceFirst(handler(item), keepAlive(item.workUnitKey)).pipe(
            Effect.as({ failed: undefined }),
            Effect.catch((error) =>
              Effect.succeed(
                Failures.isDatabaseFailure(error) ? { database: error } : { failed: Failures.describe(error) }
              )
            ),
            Effect.catchDefect((defect) => Effect.succeed({ failed: `Defect: ${Failures.describe(defect)}` }))
          )
        if ("database" in outcome) {
          yield* Metric.update(DeriverMetrics.itemDatabaseFailures, 1)
          yield* Effect.logWarning("database failure in handler; item left for a later attempt").pipe(
            Effect.annotateLogs({
              schema,
              item: item.id,
              unit: item.workUnitKey,
              error: Failures.describe(outcome.database)
            })
          )
          return "database" as const
        }
        const completed = yield* session.withConnection((connection) =>
          Queue.complete(connection, schema, item, owner, outcome.failed)
        ).pipe(Effect.result)
        if (completed._tag === "Failure") {
          yield* Metric.update(DeriverMetrics.itemDatabaseFailures, 1)
          yield* logDatabaseFailure("could not mark item; it stays unprocessed", completed.failure, {
            item: item.id,
            unit: item.workUnitKey
          })
          return "database" as const
        }
        if (outcome.failed === undefined) {
          yield* Metric.update(DeriverMetrics.itemsProcessed, 1)
        } else {
          yield* Metric.update(DeriverMetrics.itemsFailed, 1)
          yield* Effect.logWarning("handler failed; item marked with its error").pipe(
            Effect.annotateLogs({ schema, item: item.id, unit: item.workUnitKey, error: outcome.failed })
          )
        }
        return completed.success ? "done" as const : "lost" as const
      })

    const processUnit = (unit: string): Effect.Effect<void, never, R> =>
      Effect.gen(function*() {
        const startedAt = yield* Clock.currentTimeMillis
        let failures = PollBackoff.initial(workerBackoff)
        let drained = false
        while (!drained) {
          const batch = yield* session.withConnection((connection) =>
            Queue.nextItems(connection, schema, unit, config.batchSize)
          ).pipe(Effect.result)
          if (batch._tag === "Failure") {
            yield* logDatabaseFailure("could not read the unit's items; backing off", batch.failure, { unit })
            failures = yield* sleepAfterFailure(failures)
            continue
          }
          if (batch.success.length === 0) {
            drained = true
            break
          }
          for (const item of batch.success) {
            const result = yield* processItem(item)
            if (result === "lost") {
              yield* Effect.logWarning("lost ownership of the unit (stale cleanup); leaving it").pipe(
                Effect.annotateLogs({ schema, unit })
              )
              return
            }
            if (result === "database") {
              failures = yield* sleepAfterFailure(failures)
              break
            }
            failures = PollBackoff.initial(workerBackoff)
          }
        }
        // Release the unit; retried with backoff while the database is unavailable (shutdown interrupts this
        // and releases everything of this owner at once).
        while (true) {
          const released = yield* session.withConnection((connection) =>
            Queue.release(connection, schema, [unit], owner)
          ).pipe(Effect.result)
          if (released._tag === "Success") break
          yield* logDatabaseFailure("could not release the unit; backing off", released.failure, { unit })
          failures = yield* sleepAfterFailure(failures)
        }
        const finishedAt = yield* Clock.currentTimeMillis
        yield* Metric.update(DeriverMetrics.unitProcessingSeconds, (finishedAt - startedAt) / 1000)
      }).pipe(Effect.annotateLogs({ unit }))

    const releaseAll = session.withConnection((connection) => Queue.releaseOwner(connection, schema, owner)).pipe(
      Effect.tap((released) =>
        released > 0
          ? Effect.logInfo("released held work units").pipe(Effect.annotateLogs({ schema, released }))
          : Effect.void
      ),
      Effect.catch((error) =>
        logDatabaseFailure(
          "could not release held work units; the stale cleanup will free them",
          error
        )
      ),
      Effect.asVoid
    )

    const loop = yield* PollLoop.start<R>(
      { poll, process: processUnit, releaseAll },
      {
        workers: config.workers,
        backoff: config.backoff,
        initialInterval: config.initialInterval,
        startupJitterMillis: config.startupJitterMillis,
        cleanupIntervalMillis: config.cleanupIntervalMillis,
        shutdownGraceMillis: config.shutdownGraceMillis,
        observer: options.observer
      }
    )
    yield* Effect.logInfo("deriver started").pipe(
      Effect.annotateLogs({ schema, owner, workers: config.workers })
    )
    return { ...loop, schema, owner }
  })

/**
 * Runs a deriver until interrupted (e.g. by SIGTERM through `NodeRuntime.runMain`), then shuts it down
 * gracefully.
 *
 * @since 0.1.0
 */
export const run = <R>(options: Options<R>): Effect.Effect<never, never, DbSession | R> =>
  Effect.scoped(Effect.andThen(start(options), Effect.never))

/**
 * A layer that runs a deriver for its lifetime.
 *
 * @since 0.1.0
 */
export const layer = <R>(options: Options<R>): Layer.Layer<never, never, DbSession | R> =>
  Layer.effectDiscard(start(options))
