/**
 * The deriver: the {@link PollLoop} over the queue of one tenant schema. Claims units with the queue's SQL,
 * drains each in id order through the {@link Handlers} registry, records a batch's outcomes (processed, or
 * with their error) and the heartbeat in one statement, backs off on database failures, and releases its ownership rows on shutdown.
 * Every database access is one checkout through `DbSession` (a single connection attempt).
 *
 * The file reads top to bottom as the steps of one deriver: {@link fetch} (the claim), the maintenance loop
 * (stale cleanup, history retention, depth sample), the item steps (run each handler under a heartbeat, classify its outcome, record a batch at once), the unit steps
 * (drain, release), the shutdown release, and {@link start}, which wires them into the loop.
 *
 * @since 0.1.0
 */
import type { Outcome } from "@resilience/admission"
import { Classify, DbSession } from "@resilience/db-session"
import type { Connection } from "@resilience/db-session"
import { PollBackoff } from "@resilience/jitter"
import type { SchemaName } from "@resilience/schema"
import {
  Cause,
  Clock,
  Data,
  Deferred,
  Duration,
  Effect,
  Exit,
  Layer,
  Metric,
  Option,
  Predicate,
  Random,
  Result
} from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import type * as DeriverConfig from "./DeriverConfig.ts"
import * as DeriverMetrics from "./DeriverMetrics.ts"
import * as Failures from "./Failures.ts"
import * as Handlers from "./Handlers.ts"
import * as CheckoutGate from "./internal/CheckoutGate.ts"
import * as ClaimCursor from "./internal/ClaimCursor.ts"
import * as ConditionLog from "./internal/ConditionLog.ts"
import * as DueWake from "./internal/DueWake.ts"
import * as GroupCommit from "./internal/GroupCommit.ts"
import * as Heartbeat from "./internal/Heartbeat.ts"
import * as LoopLag from "./internal/LoopLag.ts"
import * as Slots from "./internal/Slots.ts"
import * as Maintenance from "./Maintenance.ts"
import type * as Overload from "./Overload.ts"
import * as PollLoop from "./PollLoop.ts"
import * as Queue from "./Queue.ts"
import * as Retries from "./Retries.ts"
import * as Scheduling from "./Scheduling.ts"

/**
 * What a deriver needs: the schema it serves, its handlers and its settings.
 *
 * @since 0.1.0
 * @category models
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
 * @category models
 */
export interface Deriver extends PollLoop.PollLoop {
  readonly schema: SchemaName.SchemaName
  readonly owner: string
}

/** What every step of one deriver shares: its session, schema, owner, handlers and settings. */
interface Shared<R> {
  readonly session: DbSession["Service"]
  readonly schema: SchemaName.SchemaName
  readonly owner: string
  readonly handlers: Handlers.Handlers<R>
  readonly config: DeriverConfig.DeriverConfig
  /** Database conditions, logged once per change of state (shared by the poll and the workers). */
  readonly conditions: ConditionLog.ConditionLog
  /** One back-off state for every checkout of this deriver (poll, workers, heartbeats, handlers, shutdown). */
  readonly gate: CheckoutGate.CheckoutGate
  /** The session handlers see: every checkout they make through `DbSession` goes through {@link gate}. */
  readonly handlerSession: DbSession["Service"]
  /** Wakes the loop when a retry this deriver recorded comes due. */
  readonly dueWake: DueWake.DueWake
  /**
   * Whether the last poll that reached the database succeeded: the maintenance loop runs its rounds only then, so
   * while the database fails, every connection attempt is a poll's (spec §8: one attempt per poll).
   */
  readonly answering: { value: boolean }
  /**
   * The maintenance round's hand-off to the poll: when a round is due the maintenance loop puts a deferred here, and
   * the next poll that claims nothing takes it and runs the round on its own checkout (so an idle deriver makes no
   * connection attempt for it on a `null` pool: one attempt per poll, as the spec counts them), then completes it
   * with whether the round succeeded. A round no poll took within {@link handOffMillis} runs on a checkout of its own.
   */
  readonly maintenance: { due: Deferred.Deferred<boolean> | undefined }
  /**
   * Where the next record's claim along starts its walk ({@link ClaimCursor}): after the newest unit the last
   * claim took, and from the start at least once per base poll interval. Records go out one at a time.
   */
  readonly claimCursor: { state: ClaimCursor.State }
  /** Renews the ownership rows of every unit held, one statement a beat, and gives up those taken over ({@link Heartbeat}). */
  readonly heartbeat: Heartbeat.Heartbeat<Queue.Claim>
  /** The records of batches whose outcomes are all done, many units a statement ({@link recordUnits}). */
  readonly records: GroupCommit.GroupCommit<UnitRecord, Recorded, unknown>
  /**
   * The handler slots: at most `workers` handlers run at once, over `workers + prefetch` units in flight; a running
   * unit's next item and a retry take a freed slot before a unit claimed ahead that has not started ({@link Slots}).
   */
  readonly slots: Slots.Slots
  /**
   * Set when a shutdown begins: a unit whose first handler has not started by the time it gets a slot is given up
   * (not run; the shutdown's release frees its ownership row), so the grace goes to the units already running.
   */
  readonly stopping: { value: boolean }
}

/** One unit's record through {@link Shared.records}, and how many units its statement may claim along. */
interface UnitRecord extends Queue.UnitRecord {
  readonly limit: number
}

/** What a record did, and the units it claimed along for this worker. */
interface Recorded extends Queue.Recorded {
  readonly claimed: ReadonlyArray<Claimed>
}

/**
 * What the loop hands a worker: the claim (with its fencing token) and the unit's first batch, read by the
 * claim statement itself (the poll's, or the record's that claimed it along).
 */
interface Claimed {
  readonly claim: Queue.Claim
  readonly items: ReadonlyArray<Queue.Item>
}

/** One checkout of this deriver, through its gate (waits while the process backs off). */
const checkout = <R, A, E, R2>(ctx: Shared<R>, f: (connection: Connection) => Effect.Effect<A, E, R2>) =>
  ctx.gate.run(ctx.session.withConnection(f))

/**
 * A handler met a database condition (db-session's table: unavailable, transient or misconfigured): its item is
 * not marked and stays for a later attempt, with the rest of its batch.
 */
class HandlerMetDatabase extends Data.TaggedError("HandlerMetDatabase")<{ readonly cause: unknown }> {}

// ---------------------------------------------------------------------------------------------------------
// Fetch: one checkout, one claim

/**
 * One poll on one checkout: the claim of up to `limit` units with the first batch of each (hop 1 of a claim's
 * path, `PollLoop`'s `fetch`; then `dispatch` hands each unit to a worker, which runs {@link processUnit}). A poll that
 * claims nothing learns when the earliest waiting item comes due, and the loop wakes then ({@link DueWake}); if a
 * maintenance round is due, it runs on the same checkout after the claim ({@link maintenanceAlong}).
 */
const fetch = <R>(ctx: Shared<R>) => (limit: number) =>
  ctx.gate.runNow(
    withClaimDeadline(ctx, (claimed) =>
      ctx.session.withConnection((connection) =>
        Queue.poll(connection, ctx.schema, limit, ctx.owner, ctx.config.batchSize).pipe(
          Effect.tap(claimed),
          Effect.tap((polled) =>
            polled.claimed.length === 0 ? maintenanceAlong(ctx, connection) : Effect.void
          )
        )
      )),
    { early: true }
  ).pipe(
    // nothing claimed, and an item waits for a known time: the loop wakes then, not at its schedule's next poll
    Effect.tap(({ nextAt }) => nextAt === undefined ? Effect.void : ctx.dueWake.at(nextAt)),
    Effect.map(({ claimed }) => claimed),
    Effect.tap(() => {
      ctx.answering.value = true
      return ctx.conditions.recovered
    }),
    Effect.tapError((error) =>
      error._tag === "GateFull"
        ? Effect.void
        : Effect.sync(() => {
          ctx.answering.value = false
        })
    ),
    Effect.tapError((error) =>
      error._tag === "GateFull"
        ? Effect.void
        : error._tag === "ClaimTimedOut"
        ? Effect.logWarning("claim cut short by DERIVER_CLAIM_TIMEOUT_SECONDS (overload)").pipe(
          Effect.annotateLogs({ schema: ctx.schema, timeoutMillis: ctx.config.claimTimeoutMillis })
        )
        : ctx.conditions.report("poll failed", error)
    )
  )

/** A poll's checkout plus claim took longer than `DERIVER_CLAIM_TIMEOUT_SECONDS` and was interrupted. */
class ClaimTimedOut extends Data.TaggedError("ClaimTimedOut")<{ readonly timeoutMillis: number }> {}

/**
 * The claim's own deadline: past it (the checkout plus the claim statement, not what runs on the checkout after the
 * claim) the poll is interrupted (the checkout closes its connection, which cancels the statement on the server)
 * and fails with {@link ClaimTimedOut}, an overload signal. `poll` calls `claimed` once its claim has answered.
 */
const withClaimDeadline = <R, A, E, R2>(
  ctx: Shared<R>,
  poll: (claimed: () => Effect.Effect<void>) => Effect.Effect<A, E, R2>
) =>
  Effect.suspend(() => {
    let answered = false
    return Effect.raceFirst(
      poll(() =>
        Effect.sync(() => {
          answered = true
        })
      ),
      Effect.andThen(
        Effect.sleep(Duration.millis(ctx.config.claimTimeoutMillis)),
        Effect.suspend(() =>
          answered ? Effect.never : Effect.fail(new ClaimTimedOut({ timeoutMillis: ctx.config.claimTimeoutMillis }))
        )
      )
    )
  })

/** What a failed poll says about overload: no connection, a claim cancelled by its timeout, or neither. */
const classifyPollFailure = (error: unknown): Overload.PollResult =>
  Classify.isUnavailable(error)
    ? "unavailable"
    : Predicate.isTagged(error, "ClaimTimedOut") ||
        Classify.isCancelled(error)
    ? "cancelled"
    : "failed"

/**
 * How many units the process can start now: none while its gate is blocked (an outage), else what the
 * gate's concurrency limit, scaled by (workers + prefetch) / workers, leaves beyond the units already held (each
 * needs checkouts to make progress; under overload the units claimed beyond the workers shrink with the limit).
 */
const capacity = <R>(ctx: Shared<R>) => (held: number): Effect.Effect<number | "blocked"> =>
  Effect.gen(function*() {
    if (yield* ctx.gate.blocked) return "blocked" as const
    const state = yield* ctx.gate.state
    const { prefetch, workers } = ctx.config
    return Math.max(0, Math.floor((state.limit.limit * (workers + prefetch)) / workers) - held)
  })

// ---------------------------------------------------------------------------------------------------------
// Maintenance: its own jittered loop (stale cleanup, history retention, depth sample), not the poll's

/** Batches of the history retention per cleanup round: small statements, at most this many per round. */
const historyBatchSize = 1000
const historyBatchesPerRound = 10

/**
 * The history retention, with the stale cleanup (so on its jittered schedule): deletes processed items older
 * than the retention window in batches of {@link historyBatchSize}, until a batch comes back short or
 * {@link historyBatchesPerRound} batches ran.
 */
const pruneHistory = <R>(ctx: Shared<R>, connection: Connection) =>
  Effect.gen(function*() {
    let total = 0
    for (let batch = 0; batch < historyBatchesPerRound; batch++) {
      const deleted = yield* Maintenance.pruneHistory(
        connection,
        ctx.schema,
        ctx.config.historyRetentionMillis / 1000,
        historyBatchSize
      )
      total += deleted
      if (deleted < historyBatchSize) break
    }
    if (total > 0) {
      yield* Metric.update(DeriverMetrics.historyPruned, total)
      yield* Effect.logDebug("pruned processed items past the retention").pipe(
        Effect.annotateLogs({ schema: ctx.schema, deleted: total })
      )
    }
  })

/**
 * The queue's depth gauges, sampled in the cleanup round's checkout (so on its jittered schedule, with no checkout
 * of its own): one statement whose counts stop at `DeriverMetrics.queueDepthCap`. A failed sample is logged at
 * debug and skipped; the gauges keep their last values and the round goes on.
 */
const sampleDepth = <R>(ctx: Shared<R>, connection: Connection) =>
  Effect.gen(function*() {
    const depth = yield* Maintenance.depth(connection, ctx.schema, DeriverMetrics.queueDepthCap)
    const now = yield* Clock.currentTimeMillis
    yield* Metric.update(DeriverMetrics.queueDepthBy.due, depth.due)
    yield* Metric.update(DeriverMetrics.queueDepthBy.waiting, depth.waiting)
    yield* Metric.update(
      DeriverMetrics.queueOldestPendingAge,
      depth.oldestDueAt === null ? 0 : Math.max(0, now - depth.oldestDueAt) / 1000
    )
  }).pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause)
        : Effect.logDebug("could not sample the queue's depth; skipped").pipe(
          Effect.annotateLogs({ schema: ctx.schema, cause: Cause.pretty(cause) })
        )
    )
  )

const cleanupStale = <R>(ctx: Shared<R>, connection: Connection) =>
  Effect.gen(function*() {
    const freed = yield* Maintenance.cleanupStale(connection, ctx.schema, ctx.config.staleTimeoutMillis / 1000)
    if (freed.length > 0) {
      yield* Metric.update(DeriverMetrics.staleUnitsReleased, freed.length)
      yield* Effect.logWarning("released stale work units").pipe(
        Effect.annotateLogs({ schema: ctx.schema, units: freed })
      )
    }
  })

/** One maintenance round's statements on `connection`: stale cleanup, history retention, depth sample. */
const roundOn = <R>(ctx: Shared<R>, connection: Connection) =>
  Effect.gen(function*() {
    yield* cleanupStale(ctx, connection)
    yield* pruneHistory(ctx, connection)
    yield* sampleDepth(ctx, connection)
  })

/**
 * The poll's part of the hand-off ({@link Shared.maintenance}): when a round is due, it runs on the poll's checkout
 * (after a claim that found nothing, so it delays no unit) and completes the hand-off with whether it succeeded; a
 * failure is reported through the condition log and does not fail the poll, whose claim has succeeded.
 */
const maintenanceAlong = <R>(ctx: Shared<R>, connection: Connection) =>
  Effect.suspend(() => {
    const due = ctx.maintenance.due
    if (due === undefined) return Effect.void
    ctx.maintenance.due = undefined
    return Effect.result(roundOn(ctx, connection)).pipe(
      Effect.tap((round) =>
        round._tag === "Success" ? Effect.void : ctx.conditions.report("maintenance round failed", round.failure)
      ),
      Effect.onExit((exit) => Deferred.succeed(due, Exit.isSuccess(exit) && exit.value._tag === "Success")),
      Effect.asVoid
    )
  })

/** One maintenance round on a checkout of its own, through the gate. */
const maintenanceRound = <R>(ctx: Shared<R>) =>
  ctx.gate.runNow(ctx.session.withConnection((connection) => roundOn(ctx, connection)))

/**
 * How long a due round waits for a poll to take it before it runs on a checkout of its own: the longest an idle poll
 * loop can take to poll again (its longest sleep, the poll backoff's cap jittered up, plus the claim's deadline), at
 * most the cleanup interval. An idle deriver's rounds ride on its polls; a busy one's, whose polls claim units (or
 * whose workers claim along with no poll at all), still run, up to that much later.
 */
const handOffMillis = (config: DeriverConfig.DeriverConfig) =>
  Math.min(
    config.backoff.maxMillis * (1 + config.backoff.ratio) + config.claimTimeoutMillis,
    config.cleanupIntervalMillis
  )

/**
 * The maintenance loop: a first round after a uniform delay up to the startup jitter, then one round per jittered
 * `DERIVER_STALE_WORK_UNIT_CLEANUP_INTERVAL_SECONDS` (`Scheduling.cleanupDelay`). A due round is handed to the next
 * poll that claims nothing ({@link Shared.maintenance}); one no poll took within {@link handOffMillis} runs on a
 * checkout of its own, through the gate, and only while the last poll that reached the database succeeded
 * ({@link Shared.answering}). A round that does not run, or fails (or finds the gate full), is tried again after a
 * jittered base poll interval; a failure is logged through the condition log like a poll's.
 */
const maintenance = <R>(ctx: Shared<R>): Effect.Effect<never> =>
  Effect.gen(function*() {
    const { backoff, cleanupIntervalMillis, startupJitterMillis } = ctx.config
    const draw = backoff.ratio === 0 ? Effect.succeed(0) : Random.next
    if (startupJitterMillis > 0) yield* Effect.sleep(Duration.millis(startupJitterMillis * (yield* Random.next)))
    while (true) {
      const due = yield* Deferred.make<boolean>()
      ctx.maintenance.due = due
      const along = yield* Effect.timeoutOption(Deferred.await(due), Duration.millis(handOffMillis(ctx.config)))
      let ok: boolean
      if (Option.isSome(along)) ok = along.value
      else if (ctx.maintenance.due !== due) ok = yield* Deferred.await(due) // a poll took it and is running it
      else {
        ctx.maintenance.due = undefined
        const round = ctx.answering.value
          ? yield* Effect.result(maintenanceRound(ctx))
          : Result.fail({ _tag: "NotAnswering" as const })
        if (round._tag === "Failure" && round.failure._tag !== "GateFull" && round.failure._tag !== "NotAnswering") {
          yield* ctx.conditions.report("maintenance round failed", round.failure)
        }
        ok = round._tag === "Success"
      }
      const delayMillis = ok
        ? Scheduling.cleanupDelay(cleanupIntervalMillis, backoff.ratio, yield* draw)
        : PollBackoff.sleepFrom(PollBackoff.initial(backoff), backoff, yield* draw)
      yield* Effect.sleep(Duration.millis(delayMillis))
    }
  })

// ---------------------------------------------------------------------------------------------------------
// Worker back-off

/**
 * Sleeps the jittered back-off of `state` and returns the next state. Evidence that the database answers (a
 * committed write's wake, honoured by the gate) ends the sleep: a worker holding a unit through an outage resumes
 * with the first write after it, not at its back-off's next step (up to the max interval later); its retry is a
 * checkout through the gate, whose circuit lets one attempt through at a time.
 */
const sleepAfterFailure = <R>(ctx: Shared<R>, state: PollBackoff.State) =>
  Effect.gen(function*() {
    const u = ctx.config.workerBackoff.ratio === 0 ? 0 : yield* Random.next
    yield* Effect.raceFirst(
      Effect.sleep(Duration.millis(PollBackoff.sleepFrom(state, ctx.config.workerBackoff, u))),
      ctx.gate.nextEvidence
    )
    return PollBackoff.step(state, ctx.config.workerBackoff)
  })

// ---------------------------------------------------------------------------------------------------------
// Items: run each handler, classify its outcome, record a batch's outcomes at once

/** What {@link runHandler} returns for a unit it gave up before its first handler (a shutdown began). */
const notStarted: unique symbol = Symbol("notStarted")

/**
 * The outcome policy: runs the item's handler (in a handler slot, under the unit's heartbeat) and says what its
 * result means for the item, as the {@link Queue.Outcome} its record writes. Success marks the item, unless the
 * handler returned a stated outcome (`Handlers.failed`, `Handlers.retry`); `Handlers.Retry` raised is a transient
 * failure, `Handlers.Failed` a permanent one; any other failure, a defect or an unknown task type marks it with its
 * error (or is transient, when the task type's policy says `unknownErrors: "retry"`). A transient failure is a
 * retry at the time the task type's policy draws (`Retries.decide`), or a dead letter after its last attempt. A
 * database condition (as a failure or a defect) fails with {@link HandlerMetDatabase}: the item is left as it is.
 */
const runHandler = <R>(
  ctx: Shared<R>,
  item: Queue.Item,
  whileRunning: Effect.Effect<never> | undefined,
  unitStarted = true
): Effect.Effect<Queue.Outcome | typeof notStarted, HandlerMetDatabase, R> => {
  const failed = (error: string | undefined): Effect.Effect<Queue.Outcome> => Effect.succeed({ item, error })
  const handler = Handlers.get(ctx.handlers, item.taskType)
  if (handler === undefined) return failed(`no handler registered for task type ${JSON.stringify(item.taskType)}`)
  const unknown = (error: string) =>
    Handlers.retriesOf(ctx.handlers, item.taskType).unknownErrors === "retry"
      ? transient(ctx, item, error, undefined)
      : failed(error)
  const run = Effect.provideService(handler(item), DbSession, ctx.handlerSession)
  const inSlot = whileRunning === undefined ? run : Effect.raceFirst(run, whileRunning)
  // a unit not started yet is given up when its slot comes after a shutdown began
  const slotted = unitStarted
    ? inSlot
    : Effect.suspend((): Effect.Effect<unknown, unknown, R> => ctx.stopping.value ? Effect.succeed(notStarted) : inSlot)
  // a running unit's next item and a due retry go ahead of units claimed ahead that have not started
  const line = unitStarted || (item.attempts ?? 0) > 0 ? "first" : "later"
  return ctx.slots.withSlot(line)(slotted).pipe(
    Effect.flatMap((value): Effect.Effect<Queue.Outcome | typeof notStarted> => {
      if (value === notStarted) return Effect.succeed(notStarted)
      if (!Handlers.isResult(value) || value._tag === "Done") return failed(undefined)
      return value._tag === "Failed"
        ? failed(Failures.errorText(value.reason))
        : transient(ctx, item, Failures.errorText(value.reason), timeOf(value.at))
    }),
    Effect.catch((error) =>
      error instanceof Handlers.Retry
        ? transient(ctx, item, Failures.errorText(error.reason), timeOf(error.at))
        : error instanceof Handlers.Failed
        ? failed(Failures.errorText(error.reason))
        : Failures.isDatabaseFailure(error)
        ? Effect.fail(new HandlerMetDatabase({ cause: error }))
        : unknown(Failures.errorText(error))
    ),
    Effect.catchDefect((defect) =>
      Failures.isDatabaseFailure(defect)
        ? Effect.fail(new HandlerMetDatabase({ cause: defect }))
        : unknown(`Defect: ${Failures.errorText(defect)}`)
    )
  )
}

/** An earliest time as epoch milliseconds. */
const timeOf = (at: number | Date | undefined): number | undefined => at === undefined ? undefined : Number(at)

/**
 * The outcome of a transient failure: a retry at the time the task type's policy draws (see `Retries.decide`),
 * or a dead letter after its last attempt.
 */
const transient = <R>(
  ctx: Shared<R>,
  item: Queue.Item,
  error: string,
  at: number | undefined
): Effect.Effect<Queue.Outcome> =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const u = yield* Random.next
    const decision = Retries.decide(Handlers.retriesOf(ctx.handlers, item.taskType), item.attempts ?? 0, now, at, u)
    return decision._tag === "Dead" ? { item, error, dead: true } : { item, error, retryAt: decision.atMillis }
  })

/**
 * Handles a batch's items in id order, each under the unit's heartbeat and with no connection held, until
 * the batch ends, a handler meets a database condition (that item and the rest stay for a later attempt) or an
 * item is to be retried (the rest of the unit waits for it: `waiting`, the unit is released).
 * Outcomes are recorded together after the last handler; but when a handler runs longer than the base poll
 * interval, the outcomes of the items before it are recorded while it runs (so a slow or stuck item does
 * not hold back the record of finished ones). Returns the outcomes not yet recorded, and whether a record
 * found the unit taken away.
 */
const handleBatch = <R>(
  ctx: Shared<R>,
  claim: Queue.Claim,
  batch: ReadonlyArray<Queue.Item>,
  unitStarted: boolean
) =>
  Effect.gen(function*() {
    let pending: Array<Queue.Outcome> = []
    let lost = false
    const flushPending = Effect.suspend(() => {
      if (pending.length === 0) return Effect.void
      const flushing = pending
      pending = []
      return recordBatch(ctx, claim, flushing, false).pipe(
        Effect.map((recorded) => {
          if (recorded === undefined) pending = [...flushing, ...pending]
          else if (!recorded.owned) lost = true
        })
      )
    })
    // The heartbeat renews the claim for the whole unit (see processUnit), not per handler.
    const whileRunning = Effect.sleep(Duration.millis(ctx.config.recordFlushMillis)).pipe(
      Effect.andThen(Effect.uninterruptible(flushPending)),
      Effect.andThen(Effect.never)
    )
    for (const [i, item] of batch.entries()) {
      // with nothing pending (the batch's first item) there is nothing to record while it runs: no timer
      const outcome = yield* Effect.result(
        ctx.heartbeat.handling(
          claim,
          runHandler(ctx, item, pending.length === 0 ? undefined : whileRunning, unitStarted || i > 0)
        )
      )
      if (lost) return { pending, complete: false, lost, waiting: false }
      if (outcome._tag === "Failure") {
        yield* Metric.update(DeriverMetrics.itemDatabaseFailures, 1)
        yield* ctx.conditions.report(
          "database failure in handler; item left for a later attempt",
          outcome.failure.cause,
          { item: item.id, unit: item.workUnitKey }
        )
        return { pending, complete: false, lost, waiting: false }
      }
      const done = outcome.success
      if (done === "lost") return { pending, complete: false, lost: true, waiting: false }
      if (done === notStarted) return { pending, complete: false, lost, waiting: false, notStarted: true }
      pending.push(done)
      // a retry holds the rest of its unit back: the unit is released and waits for it
      if (done.retryAt !== undefined) return { pending, complete: true, lost, waiting: true }
    }
    return { pending, complete: true, lost, waiting: false }
  })

/**
 * Records a batch's outcomes in one statement (one checkout), with the heartbeat, or with the release of the
 * unit when `release` (the unit looked drained). With `release`, the statement runs through the loop's `along`:
 * when it allows more, the same statement claims that many more units for this worker
 * ({@link Queue.recordAndClaim}): their claims, with their first batches, come back in `next`. Returns
 * undefined when the database failed: the batch's items stay unprocessed and are handled again
 * (at-least-once).
 */
const recordBatch = <R>(
  ctx: Shared<R>,
  claim: Queue.Claim,
  outcomes: ReadonlyArray<Queue.Outcome>,
  release: boolean,
  along?: PollLoop.Along
) =>
  Effect.gen(function*() {
    const unit = claim.workUnitKey
    const statement = (limit: number): Effect.Effect<Recorded, unknown> =>
      Queue.allDone(outcomes)
        ? ctx.records.submit({ claim, outcomes, release, limit })
        : checkout(ctx, recordOne(ctx, { claim, outcomes, release, limit }))
    const recorded = yield* (release && along !== undefined ? along(statement) : statement(0)).pipe(Effect.result)
    if (recorded._tag === "Failure") {
      yield* Metric.update(DeriverMetrics.itemDatabaseFailures, outcomes.length)
      yield* ctx.conditions.report("could not mark items; they stay unprocessed", recorded.failure, {
        unit,
        items: outcomes.length
      })
      return undefined
    }
    yield* recordedMetrics(ctx, unit, outcomes)
    if (recorded.success.owned) yield* wakeWhenDue(ctx, outcomes)
    return { owned: recorded.success.owned, marked: recorded.success.marked, next: recorded.success.claimed }
  })

/**
 * One unit's record on `connection`: `Queue.record`, or `Queue.recordAndClaim` when it may claim along. The record
 * of a unit with a retry or a dead letter, and the group commit's flush of a single unit: a flush of one needs no
 * statement of many, and `queue_record_done`'s plan is the cheaper to make on a new connection (the `null` pool).
 */
const recordOne = <R>(ctx: Shared<R>, { claim, limit, outcomes, release }: UnitRecord) => (connection: Connection) =>
  limit > 0
    ? Effect.map(
      Queue.recordAndClaim(connection, ctx.schema, claim, outcomes, release, limit, ctx.config.batchSize),
      ({ claimed, recorded }): Recorded => ({ ...recorded, claimed })
    )
    : Effect.map(
      Queue.record(connection, ctx.schema, claim, outcomes, release),
      (recorded): Recorded => ({ ...recorded, claimed: [] })
    )

/**
 * The group commit's flush, one checkout through the gate: a single unit's record alone ({@link recordOne}), the
 * records of several in one statement ({@link recordMany}).
 */
const recordUnits = <R>(ctx: Shared<R>) =>
(units: ReadonlyArray<UnitRecord>): Effect.Effect<
  ReadonlyArray<Recorded>,
  unknown
> =>
  Effect.tap(
    units.length === 1
      ? Effect.map(checkout(ctx, recordOne(ctx, units[0]!)), (recorded) => [recorded])
      : checkout(ctx, recordMany(ctx, units)),
    () => Metric.update(DeriverMetrics.recordUnitsPerStatement, units.length)
  )

/**
 * The records of several units in one statement (`Queue.recordUnits`): each unit gets its own result and the units
 * claimed along for it (as many as its `limit` asked, in claim order, while there are).
 */
const recordMany = <R>(ctx: Shared<R>, units: ReadonlyArray<UnitRecord>) => (connection: Connection) =>
  Effect.gen(function*() {
    const limit = units.reduce((sum, unit) => sum + unit.limit, 0)
    const now = yield* Clock.currentTimeMillis
    const walk = ClaimCursor.walkAt(ctx.claimCursor.state, now, ctx.config.backoff.baseMillis)
    const { claimed, recorded } = yield* Queue.recordUnits(
      connection,
      ctx.schema,
      ctx.owner,
      units,
      limit,
      ctx.config.batchSize,
      String(walk.after)
    )
    if (limit > 0) {
      const firstIds = claimed.flatMap(({ items }) => items.length > 0 ? [items[0]!.id] : [])
      ctx.claimCursor.state = ClaimCursor.advance(ctx.claimCursor.state, walk, firstIds, now)
    }
    let next = 0
    return units.map((unit): Recorded => {
      const mine = claimed.slice(next, next + unit.limit)
      next += mine.length
      return { ...(recorded.get(unit.claim.workUnitKey) ?? { owned: false, marked: 0 }), claimed: mine }
    })
  })

/**
 * A recorded retry is due at a time this deriver knows: its loop wakes then ({@link DueWake}) instead of leaving
 * the item to its schedule's next poll. The earliest retry of the batch is enough: its unit waits for it.
 */
const wakeWhenDue = <R>(ctx: Shared<R>, outcomes: ReadonlyArray<Queue.Outcome>) => {
  const times = outcomes.flatMap(({ retryAt }) => retryAt === undefined ? [] : [retryAt])
  return times.length === 0 ? Effect.void : ctx.dueWake.at(Math.min(...times))
}

/** The metrics and logs of recorded outcomes: processed, failed, retries scheduled, dead letters, attempts. */
const recordedMetrics = <R>(ctx: Shared<R>, unit: string, outcomes: ReadonlyArray<Queue.Outcome>) =>
  Effect.gen(function*() {
    let processed = 0
    let failed = 0
    let retries = 0
    let dead = 0
    for (const { dead: isDead, error, item, retryAt } of outcomes) {
      const attempt = (item.attempts ?? 0) + 1
      if (retryAt !== undefined) {
        retries++
        yield* Effect.logInfo("handler failed transiently; item scheduled for a retry").pipe(
          Effect.annotateLogs({ schema: ctx.schema, item: item.id, unit, error, attempt, retryAt })
        )
        continue
      }
      yield* Metric.update(DeriverMetrics.itemAttempts, attempt)
      if (isDead === true) {
        dead++
        yield* Effect.logWarning("handler failed its last attempt; item is a dead letter").pipe(
          Effect.annotateLogs({ schema: ctx.schema, item: item.id, unit, error, attempt })
        )
      } else if (error !== undefined) {
        failed++
        yield* Effect.logWarning("handler failed; item marked with its error").pipe(
          Effect.annotateLogs({ schema: ctx.schema, item: item.id, unit, error })
        )
      } else {
        processed++
      }
    }
    yield* Metric.update(DeriverMetrics.itemsProcessed, processed)
    if (failed > 0) yield* Metric.update(DeriverMetrics.itemsFailed, failed)
    if (retries > 0) yield* Metric.update(DeriverMetrics.retriesScheduled, retries)
    if (dead > 0) yield* Metric.update(DeriverMetrics.deadLetters, dead)
  })

// ---------------------------------------------------------------------------------------------------------
// Unit: drain in id order, then release

/**
 * How a drain ended: the unit is released already (with the units its last record claimed for this worker),
 * still ours to release, or taken by a stale cleanup.
 */
type Drained =
  | { readonly _tag: "Released"; readonly next: ReadonlyArray<Claimed> }
  | { readonly _tag: "Drained"; readonly failures: PollBackoff.State }
  | { readonly _tag: "Lost" }
  | { readonly _tag: "NotStarted" }

/**
 * Drains a unit batch by batch (the first came with the claim; then read, handle, record: two checkouts per
 * batch), backing off a failing database. A batch shorter than the batch size means the unit looks drained: its
 * record also releases the unit and, when `along` allows it, claims this worker's next unit in the same statement.
 */
const drainUnit = <R>(ctx: Shared<R>, claimed: Claimed, along: PollLoop.Along) =>
  Effect.gen(function*() {
    const { claim } = claimed
    const unit = claim.workUnitKey
    let failures = PollBackoff.initial(ctx.config.workerBackoff)
    let first: ReadonlyArray<Queue.Item> | undefined = claimed.items
    while (true) {
      const prefetched = first
      first = undefined
      const batch = prefetched !== undefined
        ? Result.succeed(prefetched)
        : yield* checkout(ctx, (connection) => Queue.nextItems(connection, ctx.schema, claim, ctx.config.batchSize))
          .pipe(Effect.result)
      if (batch._tag === "Failure") {
        yield* ctx.conditions.report("could not read the unit's items; backing off", batch.failure, { unit })
        failures = yield* sleepAfterFailure(ctx, failures)
        continue
      }
      if (batch.success.length === 0) {
        return { _tag: "Drained", failures } as Drained
      }
      const handled = yield* handleBatch(ctx, claim, batch.success, prefetched === undefined)
      if ("notStarted" in handled) return { _tag: "NotStarted" } as Drained
      const release = handled.waiting || (handled.complete && batch.success.length < ctx.config.batchSize)
      const recorded = handled.lost
        ? { owned: false, marked: 0, next: [] as ReadonlyArray<Claimed> }
        : handled.pending.length === 0 && !release
        ? { owned: true, marked: 0, next: [] as ReadonlyArray<Claimed> }
        : yield* recordBatch(ctx, claim, handled.pending, release, along)
      if (recorded !== undefined && !recorded.owned) {
        return { _tag: "Lost" } as Drained
      }
      if (recorded === undefined || !handled.complete) {
        failures = yield* sleepAfterFailure(ctx, failures)
        continue
      }
      failures = PollBackoff.initial(ctx.config.workerBackoff)
      if (release) {
        return { _tag: "Released", next: recorded.next } as Drained
      }
    }
  })

/**
 * Releases a drained unit; retried with back-off while the database is unavailable (a shutdown interrupts
 * this and releases everything of this owner at once).
 */
const releaseUnit = <R>(ctx: Shared<R>, claim: Queue.Claim, from: PollBackoff.State) =>
  Effect.gen(function*() {
    let failures = from
    while (true) {
      const released = yield* checkout(ctx, (connection) => Queue.release(connection, ctx.schema, [claim]))
        .pipe(Effect.result)
      if (released._tag === "Success") return
      yield* ctx.conditions.report("could not release the unit; backing off", released.failure, {
        unit: claim.workUnitKey
      })
      failures = yield* sleepAfterFailure(ctx, failures)
    }
  })

/**
 * A worker's whole job for one claimed unit: drain it and release it, held under the deriver's heartbeat
 * ({@link Heartbeat}: one statement a beat renews every held claim), and record how long it took. When a beat finds
 * the claim gone, the worker gives the unit up: at once when it is in a handler (the handler is interrupted), else
 * before its next one (the fenced statements would not let it read or complete anything anyway). A unit claimed ahead
 * that gets its first handler slot after a shutdown began is given up unrun ({@link Shared.stopping}).
 */
const processUnit =
  <R>(ctx: Shared<R>) => (claimed: Claimed, along: PollLoop.Along): Effect.Effect<ReadonlyArray<Claimed>, never, R> =>
    Effect.gen(function*() {
      const { claim } = claimed
      const startedAt = yield* Clock.currentTimeMillis
      const work = Effect.gen(function*() {
        const drained = yield* drainUnit(ctx, claimed, along)
        if (drained._tag === "Lost") return "lost" as const
        if (drained._tag === "NotStarted") return "notStarted" as const
        if (drained._tag === "Drained") yield* releaseUnit(ctx, claim, drained.failures)
        return drained._tag === "Released" ? drained.next : []
      })
      const outcome = yield* ctx.heartbeat.hold(claim, work)
      // given up at shutdown before its first handler: its ownership row goes with the shutdown's release
      if (outcome === "notStarted") return []
      if (outcome === "lost") {
        yield* Effect.logWarning("lost ownership of the unit (stale cleanup); gave it up").pipe(
          Effect.annotateLogs({ schema: ctx.schema, claim: claim.id })
        )
        return []
      }
      const finishedAt = yield* Clock.currentTimeMillis
      yield* Metric.update(DeriverMetrics.unitProcessingSeconds, (finishedAt - startedAt) / 1000)
      return outcome
    }).pipe(Effect.annotateLogs({ unit: claimed.claim.workUnitKey }))

// ---------------------------------------------------------------------------------------------------------
// Shutdown: release every unit still held

/**
 * Releases every unit this owner still holds, in one checkout through the gate without waiting for it. While the
 * circuit is open (an outage: a fleet stopped during an incident would otherwise knock once per process) or every
 * permit is taken, it makes no attempt, and the stale cleanup of another instance frees the units later; past
 * the window it may be the probe.
 */
const releaseAll = <R>(ctx: Shared<R>) =>
  ctx.gate.runNow(
    ctx.session.withConnection((connection) => Queue.releaseOwner(connection, ctx.schema, ctx.owner))
  ).pipe(
    Effect.tap((released) =>
      released > 0
        ? Effect.logInfo("released held work units").pipe(Effect.annotateLogs({ schema: ctx.schema, released }))
        : Effect.void
    ),
    Effect.catch((error) =>
      error._tag === "GateFull" || Classify.isAttemptHeld(error)
        ? Effect.logWarning(
          "database unavailable at shutdown (the checkout gate is holding back): held work units left for the stale cleanup"
        ).pipe(Effect.annotateLogs({ schema: ctx.schema }))
        : ctx.conditions.report("could not release held work units; the stale cleanup will free them", error)
    ),
    Effect.asVoid
  )

// ---------------------------------------------------------------------------------------------------------
// Wiring

/** The largest delay after a retry's time before its wake (DueWake's spread; at least the wakes' minimum interval). */
const dueSpreadMillis = 50

/** The gate's reading of a checkout without overload handling: an answer, or nothing (interrupted). */
const fixedCap = (exit: Exit.Exit<unknown, unknown>): Outcome.Outcome =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? "Ignored" : "Answered"

/**
 * Starts a deriver in the current scope. Closing the scope (e.g. on SIGTERM) shuts it down gracefully:
 * no new claims, in-flight units finish within the grace period, then ownership rows are released.
 *
 * @since 0.1.0
 * @category effects
 */
export const start = <R>(options: Options<R>): Effect.Effect<Deriver, never, DbSession | R | Scope.Scope> =>
  Effect.gen(function*() {
    const { config, handlers, schema } = options
    const session = yield* DbSession
    const gate = yield* CheckoutGate.make({
      maxLimit: config.workers + 1,
      backoff: config.gateBackoff,
      // without overload handling the limit never moves (a fixed cap of workers + 1 checkouts); the circuit on
      // connection attempts stays on, so attempts during an outage follow one schedule per process either way
      classify: config.overloadEnabled ? undefined : fixedCap
    })
    // the loop starts after the context it runs with: its wake reaches the due times' timer through this
    const started = yield* Deferred.make<PollLoop.PollLoop>()
    const dueWake = yield* DueWake.make(Effect.flatMap(Deferred.await(started), (loop) => loop.wake), {
      floorMillis: config.wakeMinIntervalMillis,
      spreadMillis: Math.max(config.wakeMinIntervalMillis, dueSpreadMillis)
    })
    const owner = options.owner ?? (yield* Effect.sync(() => `${hostname()}:${process.pid}:${randomUUID()}`))
    const conditions = yield* ConditionLog.make(schema)
    // before the loop: its finalizer (which waits for the units in flight) runs first at shutdown
    const heartbeat = yield* Heartbeat.make<Queue.Claim, unknown>({
      beat: (claims) =>
        gate.run(session.withConnection((connection) => Queue.heartbeats(connection, schema, owner, claims))),
      delay: Effect.map(
        Random.next,
        (u) => Scheduling.heartbeatDelay(config.staleTimeoutMillis, config.backoff.ratio, u)
      ),
      onFailure: (error, units) => conditions.report("could not renew the units' ownership", error, { units })
    })
    const shared: Omit<Shared<R>, "records"> = {
      dueWake,
      session,
      schema,
      handlers,
      config,
      owner,
      conditions,
      gate,
      heartbeat,
      handlerSession: CheckoutGate.session(gate, session),
      answering: { value: false },
      maintenance: { due: undefined },
      claimCursor: { state: ClaimCursor.initial },
      slots: yield* Slots.make(config.workers),
      stopping: { value: false }
    }
    // the records of many units: a worker's own record goes out in its fiber, those that waited in a detached one
    const records: Shared<R>["records"] = yield* GroupCommit.make((units: ReadonlyArray<UnitRecord>) =>
      recordUnits(ctx)(units)
    )
    const ctx: Shared<R> = { ...shared, records }
    const loop = yield* PollLoop.start<Claimed, R>(
      {
        key: (claimed) => claimed.claim.workUnitKey,
        poll: fetch(ctx),
        process: processUnit(ctx),
        releaseAll: releaseAll(ctx),
        classify: classifyPollFailure,
        // every checkout permit taken by this process's own work: no poll was made, nothing learnt
        refused: (error) => Predicate.isTagged(error, "GateFull"),
        capacity: capacity(ctx)
      },
      {
        workers: config.workers + config.prefetch,
        claimAlong: config.claimAlong,
        backoff: config.backoff,
        initialInterval: config.initialInterval,
        startupJitterMillis: config.startupJitterMillis,
        shutdownGraceMillis: config.shutdownGraceMillis,
        overload: config.overloadEnabled ? config.overload : undefined,
        lag: config.overloadEnabled ? (yield* LoopLag.make()).stalledMillis : undefined,
        wakeMinIntervalMillis: config.wakeMinIntervalMillis,
        observer: options.observer
      }
    )
    yield* Deferred.succeed(started, loop)
    // Before the loop's own shutdown (finalizers run last added first): units not started give up their slot.
    const stopping = Effect.sync(() => {
      ctx.stopping.value = true
    })
    yield* Effect.addFinalizer(() => stopping)
    // interrupted when the scope closes
    yield* Effect.forkScoped(maintenance(ctx))
    // A wake is a committed write: evidence that the database answers, for the checkout gate's circuit as for
    // the poll's schedule (a retry's timer, above, is no such evidence and wakes the loop alone).
    const wake = Effect.tap(
      loop.wake,
      (decision) => decision === "pollNow" || decision === "oneMoreAfter" ? gate.evidence : Effect.void
    )
    yield* Effect.logInfo("deriver started").pipe(
      Effect.annotateLogs({ schema, owner: ctx.owner, workers: config.workers })
    )
    return { ...loop, shutdown: Effect.andThen(stopping, loop.shutdown), wake, schema, owner: ctx.owner }
  })

/**
 * Runs a deriver until interrupted (e.g. by SIGTERM through `NodeRuntime.runMain`), then shuts it down
 * gracefully.
 *
 * @since 0.1.0
 * @category effects
 */
export const run = <R>(options: Options<R>): Effect.Effect<never, never, DbSession | R> =>
  Effect.scoped(Effect.andThen(start(options), Effect.never))

/**
 * A layer that runs a deriver for its lifetime.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = <R>(options: Options<R>): Layer.Layer<never, never, DbSession | R> =>
  Layer.effectDiscard(start(options))
