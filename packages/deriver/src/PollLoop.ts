/**
 * The polling loop of docs/deriver-loop.md (steps 1–5, 8), independent of SQL: startup jitter, poll, decide the next
 * sleep with {@link Scheduling}, fork claimed units onto workers bounded by a semaphore, and shut down
 * gracefully. The loop is generic over what a claim is: the {@link Deriver} plugs the queue's SQL in as a
 * {@link Source} whose claims carry their fencing token and first batch; tests plug in fakes (plain keys) to
 * check the sequence of sleeps under `TestClock`. A claim travels as a value from the poll (or the record
 * that claimed it along) to the worker that runs it; the loop holds nothing else for it.
 *
 * @since 0.1.0
 */
import { PollBackoff } from "@resilience/jitter"
import type { Coalesce } from "@resilience/wake"
import { Cause, Clock, Deferred, Duration, Effect, Fiber, FiberSet, Metric, Option, Random, Semaphore } from "effect"
import type { Scope } from "effect"
import * as DeriverMetrics from "./DeriverMetrics.ts"
import * as ClaimAlong from "./internal/ClaimAlong.ts"
import * as WakeLatch from "./internal/WakeLatch.ts"
import * as Overload from "./Overload.ts"
import * as Scheduling from "./Scheduling.ts"

/**
 * Claiming along, which the loop alone decides: runs the statement that releases a unit with how many more
 * units it may claim (`limit`, read when the statement starts: 0 unless {@link Options.claimAlong}, and only
 * while the last decision left no overload floor and its poll did not fail, no unit claimed ahead is waiting,
 * no shutdown has begun, no slow claim along paused it, and {@link Source.capacity} leaves room). A statement
 * that claimed along and took longer than the overload's slow-poll threshold (a thrash signal that only the
 * poller's own claims report to the overload schedule) pauses claiming along until the poller's next claim
 * succeeds.
 *
 * @since 0.2.0
 * @category models
 */
export type Along = <A, E, R>(statement: (limit: number) => Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/**
 * Where the loop gets its work: a poll that claims up to `limit` units, the processing of one claim, and the
 * release of everything still held at shutdown. `Claim` is what a
 * poll hands over (for the deriver: the ownership row and the unit's first batch); the loop passes it on to a
 * worker as it is.
 *
 * @since 0.1.0
 * @category models
 */
export interface Source<Claim, R> {
  /** The unit a claim is for (its work-unit key), for {@link PollLoop.held} and the events. */
  readonly key: (claim: Claim) => string
  /**
   * One poll: claim up to `limit` units and return the claims, in claim order. A failure (typically the database
   * being unavailable) is an `error` outcome; the source logs it. (Since 0.3.0 the loop no longer runs the stale
   * cleanup in its poll: the deriver's maintenance has a jittered loop of its own.)
   */
  readonly poll: (limit: number) => Effect.Effect<ReadonlyArray<Claim>, unknown, R>
  /**
   * Works a claimed unit until it is drained, releasing it when done. Interrupted at the end of the grace.
   * The statement that releases the unit runs through `along` ({@link Along}), which says how many more units
   * it may claim; it returns those claims, and the same worker takes them next, without a poll.
   */
  readonly process: (claim: Claim, along: Along) => Effect.Effect<ReadonlyArray<Claim> | void, never, R>
  /** Releases every unit this instance still holds; runs once, after the workers have stopped. */
  readonly releaseAll: Effect.Effect<void, never, R>
  /**
   * What a failed poll means for overload (default: `failed`, no signal): `unavailable` (no connection) or
   * `cancelled` (the claim hit its statement timeout).
   */
  readonly classify?: ((error: unknown) => Overload.PollResult) | undefined
  /**
   * Whether a failed poll was refused before it reached the database because this process's own work holds what
   * the poll needs (the deriver: every permit of its checkout gate taken by its workers' checkouts). Such a poll is
   * `busy`, not an `error`: nothing was polled and nothing learnt, so the backoff stays where it was and wakes stay
   * armed. A woken poll refused this way keeps its wake: the loop polls again after the wakes' minimum interval
   * (at least a millisecond), until a poll reaches the database.
   *
   * @since 0.3.0
   */
  readonly refused?: ((error: unknown) => boolean) | undefined
  /**
   * How many units the process can start now, given `held` units in progress (default: no limit but the
   * free workers), or `blocked` when it makes no database attempt at all now (an outage): the poll is then
   * skipped and counted as an unavailable one, without an attempt.
   */
  readonly capacity?: ((held: number) => Effect.Effect<number | "blocked">) | undefined
}

/**
 * Loop settings (milliseconds).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly workers: number
  /**
   * Units claimed ahead of a free worker (default 0): each waits, owned, until a worker finishes its unit and
   * takes it at once, without a poll in between, while the poller claims the next one.
   */
  readonly prefetch?: number | undefined
  /**
   * A worker that finishes a unit claims its next one in the same statement (a `limit` of 1 from
   * {@link Along}; default false). Only when {@link Along} allows it: otherwise the poller claims, as without
   * it.
   */
  readonly claimAlong?: boolean | undefined
  readonly backoff: PollBackoff.Settings
  /** Where the schedule starts after the startup delay (default `base`). */
  readonly initialInterval?: Scheduling.InitialInterval | undefined
  readonly startupJitterMillis: number
  /**
   * No longer read: the loop's poll has no cleanup round since 0.3.0 (the deriver's maintenance runs on its own
   * jittered loop).
   *
   * @deprecated Since 0.3.0; goes in 0.4.0.
   */
  readonly cleanupIntervalMillis?: number | undefined
  readonly shutdownGraceMillis: number
  /** Overload-aware polling ({@link Overload}); without it, polls carry no overload signal. */
  readonly overload?: Overload.Settings | undefined
  /**
   * The process's own time so far (cumulative milliseconds, non-decreasing: `LoopLag`), read around each poll
   * so its overload signal counts the database's time only ({@link Overload.signalOfPoll}); without it, a
   * poll's lag is 0.
   *
   * @since 0.3.0
   */
  readonly lag?: Effect.Effect<number> | undefined
  /**
   * The least time from one poll's start to a woken poll's start (default 0): with it, a flood of wakes makes at
   * most one poll per interval (see {@link PollLoop.wake}).
   */
  readonly wakeMinIntervalMillis?: number | undefined
  /**
   * After a woken poll failed, wakes are ignored until a poll succeeds or this long has passed since the last poll
   * started (default: the backoff's base): a write that commits after an outage makes the next woken poll at once,
   * and while writes commit and polls fail, wakes add at most one attempt per this interval.
   *
   * @since 0.3.0
   */
  readonly wakeRearmMillis?: number | undefined
  /** Called for every scheduling event (tests, benchmarks); must not fail. */
  readonly observer?: ((event: Event) => Effect.Effect<void>) | undefined
}

/**
 * What the loop decided, for observers.
 *
 * @since 0.1.0
 * @category models
 */
export type Event =
  | { readonly _tag: "Started"; readonly startupDelayMillis: number }
  | {
    readonly _tag: "Polled"
    readonly outcome: Scheduling.Outcome
    /** Units claimed by this poll. */
    readonly claimed: ReadonlyArray<string>
    /** The sleep that follows (0: poll again at once). */
    readonly sleepMillis: number
    /** The unjittered interval of the schedule after the decision. */
    readonly intervalMillis: number
    /** The overload floor in force after the decision (0: no overload). */
    readonly floorMillis: number
    /** The poll's overload signal (`none` when there was no poll). */
    readonly signal: Overload.Signal
    /** Whether a wake made this poll (ended the sleep before it, or asked for it while the last was in flight). */
    readonly woken: boolean
  }
  | { readonly _tag: "Stopping" }
  | { readonly _tag: "Stopped"; readonly interruptedUnits: ReadonlyArray<string> }

/**
 * A running loop.
 *
 * @since 0.1.0
 * @category models
 */
export interface PollLoop {
  /** The units this loop holds right now (their keys): being worked on, or claimed ahead and waiting for a worker. */
  readonly held: Effect.Effect<ReadonlyArray<string>>
  /**
   * Graceful shutdown: stop claiming at once (sleeps are interrupted), let in-flight units finish within the
   * grace period, interrupt what is left, then release every ownership row still held. Idempotent; also runs
   * when the loop's scope closes.
   */
  readonly shutdown: Effect.Effect<void>
  /** Completes when a shutdown has finished. */
  readonly stopped: Effect.Effect<void>
  /**
   * A wake: work was committed for this loop's queue (`@resilience/wake`'s `Coalesce` decides). It ends the
   * sleep at once (`pollNow`), or, while a poll is in flight, asks for one more poll after it (`oneMoreAfter`);
   * a wake that finds one waiting is `coalesced` into it. A woken poll starts no sooner than
   * {@link Options.wakeMinIntervalMillis} after the last poll started. A wake is evidence that the database
   * answered: the schedule goes back to its base before the woken poll; if that poll fails anyway, the schedule
   * is restored as it was (a wake never shortens the outage schedule) and wakes are `ignored` until a poll
   * succeeds, or {@link Options.wakeRearmMillis} after the last poll started. It never ends a sleep the overload floor imposes (the poll after it covers the wake), never skips
   * the checkout gate (the poll is an ordinary one) and claims no more than a poll does. Returns at once.
   */
  readonly wake: Effect.Effect<Coalesce.Decision>
  /**
   * Completes, with the cause, when the poller or a worker died of a defect outside a handler (a bug in the
   * loop itself): the loop no longer polls, or a unit is no longer worked. Logged at FATAL and counted in
   * `deriver_loop_deaths_total{where}`; a process should end non-zero (apps/deriver does).
   */
  readonly died: Effect.Effect<Cause.Cause<unknown>>
}

/** Settings under which no signal changes anything (a loop without overload settings). */
const noOverload: Overload.Settings = { slowPollMillis: Infinity, maxMillis: 0, multiplier: 1, recoveryMillis: 1 }

/**
 * Starts the loop in the current scope; closing the scope shuts it down gracefully.
 *
 * One claim's path through the loop is three hops, each a function below: `fetch` (one look at the free workers
 * and one poll of the source), `dispatch` (the claimed units to free workers, or to the units claimed ahead), and
 * `work` (a worker's run of its unit, and of each unit claimed ahead or along after it, through
 * {@link Source.process}). Around them: `schedule`, the loop of polls and sleeps that {@link Overload.decide}
 * decides; claiming along and the wakes are small parts of their own.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = <Claim, R>(
  source: Source<Claim, R>,
  options: Options
): Effect.Effect<PollLoop, never, R | Scope.Scope> =>
  Effect.gen(function*() {
    const settings = options.backoff
    const observe = options.observer ?? (() => Effect.void)
    const semaphore = yield* Semaphore.make(options.workers)
    const prefetch = options.prefetch ?? 0
    const lag = options.lag ?? Effect.succeed(0)
    /** The claims this loop holds: being worked on, or in `ready`. */
    const held = new Set<Claim>()
    /** Claims made ahead (with `prefetch`), in claim order, for the next worker that finishes. */
    const ready: Array<Claim> = []
    /** Workers running a unit now (each holds a permit of `semaphore`). */
    let running = 0
    let stopping = false
    const claimAlong = ClaimAlong.make(
      options.claimAlong === true,
      {
        open: () => !stopping && ready.length === 0,
        // the unit being released no longer counts
        room: () => source.capacity === undefined ? Effect.succeed(1) : source.capacity(held.size - 1)
      },
      options.overload,
      lag
    )
    const wakes = yield* WakeLatch.make(options.wakeRearmMillis ?? settings.baseMillis)
    const workers = yield* FiberSet.make<void, never>()
    const stopped = yield* Deferred.make<void>()
    const died = yield* Deferred.make<Cause.Cause<unknown>>()
    /** A defect outside a handler: logged, counted and published on `died`; interruptions are not deaths. */
    const reportDeath = (where: "poller" | "worker") => <E>(cause: Cause.Cause<E>): Effect.Effect<void> =>
      Cause.hasInterruptsOnly(cause) ? Effect.void : Effect.gen(function*() {
        yield* Effect.logFatal("deriver loop died outside a handler", cause).pipe(Effect.annotateLogs({ where }))
        yield* Metric.update(Metric.withAttributes(DeriverMetrics.loopDeaths, { where }), 1)
        yield* Deferred.succeed(died, cause)
      })
    // Completed when a worker becomes free; a fresh one is made before each look at the free workers, so a
    // worker freed after that look always ends the busy sleep that follows.
    let workerFreed = yield* Deferred.make<void>()

    /**
     * Hop 3, a worker: its unit, then each unit claimed along or ahead while there is one (no poll in between); then
     * its permit goes back. A finished unit wakes the poller when that leaves a slot it may fill (a unit to claim
     * ahead); a worker that stops wakes it for the free worker.
     */
    const work = (first: Claim): Effect.Effect<void, never, R> =>
      Effect.gen(function*() {
        let unit: Claim | undefined = first
        while (unit !== undefined) {
          const current: Claim = unit
          const next = yield* source.process(current, claimAlong.along).pipe(
            Effect.ensuring(Effect.sync(() => held.delete(current)))
          )
          // after the delete: the record may have claimed the same unit again (new items came in)
          for (const claimed of next ?? []) held.add(claimed)
          if (next !== undefined && next.length > 0) {
            // this worker's own claims come first; more than it can take wait like units claimed ahead
            ready.unshift(...next)
            yield* Metric.update(DeriverMetrics.claims, next.length)
          }
          unit = stopping ? undefined : ready.shift()
          if (unit !== undefined) {
            // the poller looks again only when it could claim: with this worker's next unit claimed along
            // (the common case) every slot is still held, and its look would only find the workers busy
            if (options.workers + prefetch - held.size > 0) yield* Deferred.succeed(workerFreed, undefined)
            yield* Metric.update(DeriverMetrics.unitsInFlight, held.size)
          }
        }
      }).pipe(
        Effect.onError(reportDeath("worker")),
        Effect.ensuring(
          Effect.suspend(() => {
            running -= 1
            return semaphore.release(1).pipe(
              Effect.andThen(Deferred.succeed(workerFreed, undefined)),
              Effect.andThen(Metric.update(DeriverMetrics.unitsInFlight, held.size))
            )
          })
        )
      )

    /** Hop 2: claimed units to free workers (each forks {@link work}), the rest to the units claimed ahead. */
    const dispatch = (units: ReadonlyArray<Claim>): Effect.Effect<void, never, R> =>
      Effect.gen(function*() {
        for (const unit of units) {
          held.add(unit)
          if (running < options.workers) {
            yield* semaphore.take(1)
            running += 1
            yield* FiberSet.run(workers, work(unit))
          } else {
            ready.push(unit)
          }
        }
        if (units.length > 0) yield* Metric.update(DeriverMetrics.claims, units.length)
        yield* Metric.update(DeriverMetrics.unitsInFlight, held.size)
      })

    /**
     * Hop 1: one look at the workers and the database. Polls when anything can start (else `busy`, or a skipped poll
     * while the source is blocked) and dispatches what the poll claimed. The poll itself is interruptible: a
     * shutdown does not wait for a statement stuck behind a hung pooler or a lock (interrupting it closes the
     * connection and cancels the statement on the server). The dispatch is one uninterruptible step with the
     * poll's result, so a shutdown never strands a unit that the database says we own but no worker holds; a claim
     * cut short after its commit leaves rows that `releaseAll` removes.
     */
    const fetch = Effect.fnUntraced(function*() {
      const free = options.workers + prefetch - held.size
      const capacity = source.capacity === undefined ? free : yield* source.capacity(held.size)
      if (capacity === "blocked") return { outcome: "error" as const, claimed: [], result: "unavailable" as const }
      const room = Math.min(free, capacity)
      if (room <= 0) return { outcome: "busy" as const, claimed: [], result: undefined }
      const startedAt = yield* Clock.currentTimeMillis
      const lagAtStart = yield* lag
      const polled = yield* Effect.uninterruptibleMask((restore) =>
        restore(source.poll(room)).pipe(
          Effect.tap((units) => {
            claimAlong.polled()
            return dispatch(units)
          }),
          Effect.map((units) => ({ units })),
          Effect.catch((error) =>
            Effect.succeed(
              source.refused?.(error) === true
                ? { refused: true as const }
                : { result: source.classify?.(error) ?? ("failed" as const) }
            )
          )
        )
      )
      // refused before the database: as busy as a look that found no room, but the loop learns it only now
      if ("refused" in polled) return { outcome: "busy" as const, claimed: [], result: undefined, refused: true }
      const elapsedMillis = (yield* Clock.currentTimeMillis) - startedAt
      // read again only for a poll slow by its elapsed time alone (see ClaimAlong)
      const lagMillis = options.overload !== undefined && elapsedMillis > options.overload.slowPollMillis
        ? (yield* lag) - lagAtStart
        : 0
      if ("result" in polled) {
        return { outcome: "error" as const, claimed: [], result: polled.result, elapsedMillis, lagMillis }
      }
      return {
        outcome: polled.units.length > 0 ? "claimed" as const : "empty" as const,
        claimed: polled.units.map(source.key),
        result: "succeeded" as const,
        elapsedMillis,
        lagMillis
      }
    })

    /** The loop of polls and sleeps: {@link fetch}, decide ({@link Overload.decide}), sleep until time, a wake or a free worker. */
    const schedule = Effect.gen(function*() {
      let state = Scheduling.initialState(settings, options.initialInterval ?? "base")
      let overload = Overload.initial
      /** Whether the next poll is a woken one, and the schedule as it was before the wake reset it. */
      let woken: PollBackoff.State | undefined = undefined
      /** Whether the next poll is a woken one's retry (the wake it owes was counted when it was first tried). */
      let owing = false
      const wakeMinIntervalMillis = options.wakeMinIntervalMillis ?? 0
      while (true) {
        workerFreed = yield* Deferred.make<void>()
        const freed = workerFreed
        const awoken = yield* wakes.started(yield* Clock.currentTimeMillis)
        const beforeWake = woken
        woken = undefined
        if (beforeWake !== undefined && !owing) yield* Metric.update(DeriverMetrics.pollsWoken, 1)
        owing = false
        const polled = yield* fetch()
        const { claimed, outcome } = polled
        const again = wakes.finished(
          polled.result === undefined
            ? { succeeded: false, woken: false }
            : { succeeded: polled.result === "succeeded", woken: beforeWake !== undefined }
        )
        // a woken poll that failed: the wake was no evidence after all; the outage schedule goes on as it was
        if (beforeWake !== undefined && outcome === "error") state = beforeWake
        const signal = options.overload === undefined || polled.result === undefined
          ? "none"
          : Overload.signalOfPoll(options.overload, {
            result: polled.result,
            elapsedMillis: polled.elapsedMillis ?? 0,
            lagMillis: polled.lagMillis ?? 0
          })
        const u = Overload.needsDraw(outcome, signal, settings) ? yield* Random.next : 0
        const decision = Overload.decide({
          settings: options.overload ?? noOverload,
          backoff: settings,
          schedule: state,
          overload,
          outcome,
          signal,
          nowMillis: yield* Clock.currentTimeMillis,
          u
        })
        state = decision.schedule
        overload = decision.overload
        claimAlong.decided(decision.floorMillis === 0 && outcome !== "error")
        yield* Metric.update(DeriverMetrics.pollsBy[outcome], 1)
        yield* Metric.update(DeriverMetrics.pollInterval, state.currentMillis / 1000)
        yield* Metric.update(DeriverMetrics.overloadFloor, decision.floorMillis / 1000)
        yield* observe({
          _tag: "Polled",
          outcome,
          claimed,
          sleepMillis: decision.sleepMillis,
          intervalMillis: state.currentMillis,
          floorMillis: decision.floorMillis,
          signal,
          woken: beforeWake !== undefined
        })
        // Wakes end a sleep unless the overload floor imposes it (the poll after the floor covers them).
        const wakeable = decision.floorMillis === 0
        if (decision.sleepMillis === 0) {
          yield* Effect.yieldNow
          continue
        }
        // a woken poll refused before the database (see Source.refused) still owes its wake
        const owed = beforeWake !== undefined && "refused" in polled
        const ended = (again || owed) && wakeable ? "wake" as const : yield* Effect.raceAll([
          Effect.as(Effect.sleep(Duration.millis(decision.sleepMillis)), "time" as const),
          // A local event, not time: the worker that frees first ends the sleep (the jittered base stays the
          // upper bound, so a lost wake-up costs no more than before).
          ...(decision.wakeable ? [Effect.as(Deferred.await(freed), "worker" as const)] : []),
          ...(wakeable ? [Effect.as(awoken, "wake" as const)] : [])
        ])
        if (ended === "wake") {
          const delayMillis = wakes.delayMillis(
            owed ? Math.max(1, wakeMinIntervalMillis) : wakeMinIntervalMillis,
            yield* Clock.currentTimeMillis
          )
          if (delayMillis > 0) yield* Effect.sleep(Duration.millis(delayMillis))
          // a wake is evidence that the database answered: the schedule starts again from its base
          woken = state
          owing = owed
          state = PollBackoff.initial(settings)
        }
      }
    })

    const main = Effect.gen(function*() {
      const startupDelayMillis = options.startupJitterMillis > 0
        ? Scheduling.startupDelay(options.startupJitterMillis, yield* Random.next)
        : 0
      yield* observe({ _tag: "Started", startupDelayMillis })
      if (startupDelayMillis > 0) yield* Effect.sleep(Duration.millis(startupDelayMillis))
      return yield* schedule
    })

    const poller = yield* Effect.forkDetach(main.pipe(Effect.onError(reportDeath("poller"))))

    const shutdown: Effect.Effect<void, never, R> = Effect.suspend(() => {
      if (stopping) return Deferred.await(stopped)
      stopping = true
      return Effect.gen(function*() {
        yield* observe({ _tag: "Stopping" })
        yield* Fiber.interrupt(poller)
        const finished = yield* Effect.interruptible(FiberSet.awaitEmpty(workers)).pipe(
          Effect.timeoutOption(Duration.millis(options.shutdownGraceMillis))
        )
        const interruptedUnits = Option.isNone(finished) ? [...held].map(source.key) : []
        if (interruptedUnits.length > 0) {
          yield* Effect.logWarning("shutdown grace period over; interrupting in-flight units").pipe(
            Effect.annotateLogs({ units: interruptedUnits })
          )
          yield* FiberSet.clear(workers)
          yield* Effect.interruptible(FiberSet.awaitEmpty(workers))
        }
        yield* source.releaseAll
        yield* observe({ _tag: "Stopped", interruptedUnits })
        yield* Deferred.succeed(stopped, undefined)
      }).pipe(Effect.uninterruptible)
    })

    const context = yield* Effect.context<R>()
    const shutdownProvided = Effect.provideContext(shutdown, context)
    yield* Effect.addFinalizer(() => shutdownProvided)

    return {
      held: Effect.sync(() => [...held].map(source.key)),
      shutdown: shutdownProvided,
      stopped: Deferred.await(stopped),
      died: Deferred.await(died),
      wake: wakes.wake
    }
  })
