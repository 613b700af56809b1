/**
 * The deriver: the {@link PollLoop} over the queue of one tenant schema. Claims units with the queue's SQL,
 * drains each in id order through the {@link Handlers} registry, marks items processed (or with their
 * error), bumps the heartbeat, backs off on database failures, and releases its ownership rows on shutdown.
 * Every database access is one checkout through `DbSession` (a single connection attempt).
 *
 * The file reads top to bottom as the steps of one deriver: {@link pollStep} (stale cleanup and claim),
 * the item steps (run the handler under a heartbeat, classify its outcome, record it), the unit steps
 * (drain, release), the shutdown release, and {@link start}, which wires them into the loop.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { Connection } from "@resilience/db-session"
import { PollBackoff } from "@resilience/jitter"
import { Clock, Duration, Effect, Layer, Metric, Random } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import * as ConditionLog from "./ConditionLog.ts"
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

/** What every step of one deriver shares: its session, schema, owner, handlers and settings. */
interface Context<R> {
  readonly session: DbSession["Service"]
  readonly schema: SchemaName.SchemaName
  readonly owner: string
  readonly handlers: Handlers.Handlers<R>
  readonly config: DeriverConfig.DeriverConfig
  /** Workers back off a failing database with the poll schedule's own settings (jittered, capped). */
  readonly workerBackoff: PollBackoff.Settings
  /** Database conditions, logged once per change of state (shared by the poll and the workers). */
  readonly conditions: ConditionLog.ConditionLog
}

/** What became of one item: recorded (`done`), left unprocessed (`database`), or the unit was taken (`lost`). */
type ItemResult = "done" | "database" | "lost"

/** What a handler's run means for its item: mark it (with an error, or none), or leave it for later. */
type HandlerOutcome = { readonly failed: string | undefined } | { readonly database: unknown }

// ---------------------------------------------------------------------------------------------------------
// Poll: one checkout, the stale cleanup when due, then the claim

/** One poll on one checkout: the stale cleanup when due, then the claim of up to `limit` units. */
const pollStep = <R>(ctx: Context<R>) => (limit: number, cleanup: boolean) =>
  ctx.session.withConnection((connection) =>
    Effect.gen(function*() {
      if (cleanup) yield* cleanupStale(ctx, connection)
      return yield* Queue.claim(connection, ctx.schema, limit, ctx.owner)
    })
  ).pipe(
    Effect.tap(() => ctx.conditions.recovered),
    Effect.tapError((error) => ctx.conditions.report("poll failed", error))
  )

const cleanupStale = <R>(ctx: Context<R>, connection: Connection) =>
  Effect.gen(function*() {
    const freed = yield* Queue.cleanupStale(connection, ctx.schema, ctx.config.staleTimeoutMillis / 1000)
    if (freed.length > 0) {
      yield* Metric.update(DeriverMetrics.staleUnitsReleased, freed.length)
      yield* Effect.logWarning("released stale work units").pipe(
        Effect.annotateLogs({ schema: ctx.schema, units: freed })
      )
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Worker back-off

/** Sleeps the jittered back-off of `state` and returns the next state. */
const sleepAfterFailure = <R>(ctx: Context<R>, state: PollBackoff.State) =>
  Effect.gen(function*() {
    const u = ctx.workerBackoff.ratio === 0 ? 0 : yield* Random.next
    yield* Effect.sleep(Duration.millis(PollBackoff.sleepFrom(state, ctx.workerBackoff, u)))
    return PollBackoff.step(state, ctx.workerBackoff)
  })

// ---------------------------------------------------------------------------------------------------------
// Heartbeat

/**
 * Keeps a unit's ownership row fresh while one of its items is being handled, so a handler that runs
 * longer than the stale timeout does not lose its unit to another instance: a heartbeat every third of
 * the timeout, each one checkout; a failed beat is logged and the next one tries again at its time.
 */
const keepAlive = <R>(ctx: Context<R>, unit: string): Effect.Effect<never> =>
  Effect.forever(
    Effect.sleep(Duration.millis(ctx.config.staleTimeoutMillis / 3)).pipe(
      Effect.andThen(
        ctx.session.withConnection((connection) => Queue.heartbeat(connection, ctx.schema, unit, ctx.owner))
      ),
      Effect.catch((error) => ctx.conditions.report("could not renew the unit's ownership", error, { unit }))
    )
  )

// ---------------------------------------------------------------------------------------------------------
// Item: run the handler, classify its outcome, record it

/**
 * The outcome policy: runs the item's handler (under the unit's heartbeat) and says what its result means.
 * Success marks the item; a handler failure, a defect or an unknown task type marks it with its error; a
 * database condition (db-session's table: unavailable, transient or misconfigured; as a failure or a defect)
 * leaves it unprocessed for a later attempt.
 */
const runHandler = <R>(ctx: Context<R>, item: Queue.Item): Effect.Effect<HandlerOutcome, never, R> => {
  const handler = Handlers.get(ctx.handlers, item.taskType)
  if (handler === undefined) {
    return Effect.succeed({ failed: `no handler registered for task type ${JSON.stringify(item.taskType)}` })
  }
  return Effect.raceFirst(handler(item), keepAlive(ctx, item.workUnitKey)).pipe(
    Effect.as<HandlerOutcome>({ failed: undefined }),
    Effect.catch((error) =>
      Effect.succeed<HandlerOutcome>(
        Failures.isDatabaseFailure(error) ? { database: error } : { failed: Failures.describe(error) }
      )
    ),
    Effect.catchDefect((defect) =>
      Effect.succeed<HandlerOutcome>(
        Failures.isDatabaseFailure(defect) ? { database: defect } : { failed: `Defect: ${Failures.describe(defect)}` }
      )
    )
  )
}

/** Records a marked outcome (processed, or with its error) with the heartbeat in one statement. */
const recordOutcome = <R>(ctx: Context<R>, item: Queue.Item, failed: string | undefined) =>
  Effect.gen(function*() {
    const completed = yield* ctx.session.withConnection((connection) =>
      Queue.complete(connection, ctx.schema, item, ctx.owner, failed)
    ).pipe(Effect.result)
    if (completed._tag === "Failure") {
      yield* Metric.update(DeriverMetrics.itemDatabaseFailures, 1)
      yield* ctx.conditions.report("could not mark item; it stays unprocessed", completed.failure, {
        item: item.id,
        unit: item.workUnitKey
      })
      return "database" as const
    }
    if (failed === undefined) {
      yield* Metric.update(DeriverMetrics.itemsProcessed, 1)
    } else {
      yield* Metric.update(DeriverMetrics.itemsFailed, 1)
      yield* Effect.logWarning("handler failed; item marked with its error").pipe(
        Effect.annotateLogs({ schema: ctx.schema, item: item.id, unit: item.workUnitKey, error: failed })
      )
    }
    return completed.success ? "done" as const : "lost" as const
  })

/** One item: run its handler, then record the outcome or leave the item for a later attempt. */
const processItem = <R>(ctx: Context<R>, item: Queue.Item): Effect.Effect<ItemResult, never, R> =>
  Effect.gen(function*() {
    const outcome = yield* runHandler(ctx, item)
    if ("database" in outcome) {
      yield* Metric.update(DeriverMetrics.itemDatabaseFailures, 1)
      yield* ctx.conditions.report("database failure in handler; item left for a later attempt", outcome.database, {
        item: item.id,
        unit: item.workUnitKey
      })
      return "database" as const
    }
    return yield* recordOutcome(ctx, item, outcome.failed)
  })

// ---------------------------------------------------------------------------------------------------------
// Unit: drain in id order, then release

/**
 * Drains a unit batch by batch, backing off a failing database. Returns the back-off state reached and
 * whether the unit is still ours (false: a stale cleanup took it away, so it must not be released).
 */
const drainUnit = <R>(ctx: Context<R>, unit: string) =>
  Effect.gen(function*() {
    let failures = PollBackoff.initial(ctx.workerBackoff)
    while (true) {
      const batch = yield* ctx.session.withConnection((connection) =>
        Queue.nextItems(connection, ctx.schema, unit, ctx.config.batchSize)
      ).pipe(Effect.result)
      if (batch._tag === "Failure") {
        yield* ctx.conditions.report("could not read the unit's items; backing off", batch.failure, { unit })
        failures = yield* sleepAfterFailure(ctx, failures)
        continue
      }
      if (batch.success.length === 0) return { owned: true, failures }
      for (const item of batch.success) {
        const result = yield* processItem(ctx, item)
        if (result === "lost") {
          yield* Effect.logWarning("lost ownership of the unit (stale cleanup); leaving it").pipe(
            Effect.annotateLogs({ schema: ctx.schema, unit })
          )
          return { owned: false, failures }
        }
        if (result === "database") {
          failures = yield* sleepAfterFailure(ctx, failures)
          break
        }
        failures = PollBackoff.initial(ctx.workerBackoff)
      }
    }
  })

/**
 * Releases a drained unit; retried with back-off while the database is unavailable (a shutdown interrupts
 * this and releases everything of this owner at once).
 */
const releaseUnit = <R>(ctx: Context<R>, unit: string, from: PollBackoff.State) =>
  Effect.gen(function*() {
    let failures = from
    while (true) {
      const released = yield* ctx.session.withConnection((connection) =>
        Queue.release(connection, ctx.schema, [unit], ctx.owner)
      ).pipe(Effect.result)
      if (released._tag === "Success") return
      yield* ctx.conditions.report("could not release the unit; backing off", released.failure, { unit })
      failures = yield* sleepAfterFailure(ctx, failures)
    }
  })

/** A worker's whole job for one claimed unit: drain it, release it, record how long it took. */
const processUnit = <R>(ctx: Context<R>) => (unit: string): Effect.Effect<void, never, R> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    const drained = yield* drainUnit(ctx, unit)
    if (!drained.owned) return
    yield* releaseUnit(ctx, unit, drained.failures)
    const finishedAt = yield* Clock.currentTimeMillis
    yield* Metric.update(DeriverMetrics.unitProcessingSeconds, (finishedAt - startedAt) / 1000)
  }).pipe(Effect.annotateLogs({ unit }))

// ---------------------------------------------------------------------------------------------------------
// Shutdown: release every unit still held

const releaseAll = <R>(ctx: Context<R>) =>
  ctx.session.withConnection((connection) => Queue.releaseOwner(connection, ctx.schema, ctx.owner)).pipe(
    Effect.tap((released) =>
      released > 0
        ? Effect.logInfo("released held work units").pipe(Effect.annotateLogs({ schema: ctx.schema, released }))
        : Effect.void
    ),
    Effect.catch((error) =>
      ctx.conditions.report("could not release held work units; the stale cleanup will free them", error)
    ),
    Effect.asVoid
  )

// ---------------------------------------------------------------------------------------------------------
// Wiring

/**
 * Starts a deriver in the current scope. Closing the scope (e.g. on SIGTERM) shuts it down gracefully:
 * no new claims, in-flight units finish within the grace period, then ownership rows are released.
 *
 * @since 0.1.0
 */
export const start = <R>(options: Options<R>): Effect.Effect<Deriver, never, DbSession | R | Scope.Scope> =>
  Effect.gen(function*() {
    const { config, handlers, schema } = options
    const ctx: Context<R> = {
      session: yield* DbSession,
      schema,
      handlers,
      config,
      owner: options.owner ?? (yield* Effect.sync(() => `${hostname()}:${process.pid}:${randomUUID()}`)),
      workerBackoff: { ...config.backoff, enabled: true },
      conditions: yield* ConditionLog.make(schema)
    }
    const loop = yield* PollLoop.start<R>(
      { poll: pollStep(ctx), process: processUnit(ctx), releaseAll: releaseAll(ctx) },
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
      Effect.annotateLogs({ schema, owner: ctx.owner, workers: config.workers })
    )
    return { ...loop, schema, owner: ctx.owner }
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
