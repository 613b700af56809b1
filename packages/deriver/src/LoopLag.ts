/**
 * The process's own delay: how long this process's event loop could not run, as a cumulative count of
 * milliseconds, so the overload signal can tell the database's time from the host's (a CPU-starved process
 * or a CPU-throttled pod sees every poll slow, whatever the database does; see {@link Overload.signalOfPoll}).
 *
 * A timer drift probe: a timer is due every `intervalMillis`; whatever it fires later than due (beyond a small
 * tolerance for the timer's own resolution) is time the loop was held up, by the host's scheduler or by the
 * process's own work. The count is non-decreasing, including a stall in progress (the time past the due tick
 * that has not fired yet), so the lag over a window is the difference of two reads. The arithmetic is pure
 * ({@link tick}, {@link stalledAt}); {@link make} runs it on a real timer, unref'd, for the scope's lifetime.
 *
 * Why not `perf_hooks.monitorEventLoopDelay`: it keeps a histogram of delays (percentiles since its last
 * reset), not a sum over a window, and a window per poll would need a reset that every other reader shares.
 *
 * @since 0.3.0
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { performance } from "node:perf_hooks"

/**
 * Probe settings (milliseconds).
 *
 * @since 0.3.0
 * @category models
 */
export interface Settings {
  /** How often the probe's timer is due (default 50). */
  readonly intervalMillis: number
  /** Lateness per tick not counted (the timer's own resolution; default 2). */
  readonly toleranceMillis: number
}

/**
 * The defaults: a tick every 50 ms (20 timer callbacks a second), 2 ms of lateness per tick forgiven.
 *
 * @since 0.3.0
 */
export const defaults: Settings = { intervalMillis: 50, toleranceMillis: 2 }

/**
 * The probe's state: the lag counted so far and when the next tick is due.
 *
 * @since 0.3.0
 * @category models
 */
export interface State {
  readonly stalledMillis: number
  readonly dueAtMillis: number
}

/**
 * The state of a probe started at `nowMillis`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const initial = (settings: Settings, nowMillis: number): State => ({
  stalledMillis: 0,
  dueAtMillis: nowMillis + settings.intervalMillis
})

const lateness = (settings: Settings, state: State, nowMillis: number): number =>
  Math.max(0, nowMillis - state.dueAtMillis - settings.toleranceMillis)

/**
 * The state after the tick that fired at `nowMillis`: its lateness counted, the next one due an interval later.
 *
 * @since 0.3.0
 * @category decisions
 */
export const tick = (settings: Settings, state: State, nowMillis: number): State => ({
  stalledMillis: state.stalledMillis + lateness(settings, state, nowMillis),
  dueAtMillis: nowMillis + settings.intervalMillis
})

/**
 * The lag counted up to `nowMillis`, including the tick that is overdue and has not fired yet (so two reads
 * around a stall see it, even before the probe's timer runs again). Non-decreasing in time.
 *
 * @since 0.3.0
 * @category decisions
 */
export const stalledAt = (settings: Settings, state: State, nowMillis: number): number =>
  state.stalledMillis + lateness(settings, state, nowMillis)

/**
 * A running probe.
 *
 * @since 0.3.0
 * @category models
 */
export interface LoopLag {
  /** The lag counted since the probe started (milliseconds, non-decreasing). */
  readonly stalledMillis: Effect.Effect<number>
}

/**
 * Starts a probe on a real timer (monotonic clock, `performance.now()`) for the scope's lifetime. Its timer
 * is unref'd: it never keeps a process alive.
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (options?: Partial<Settings>): Effect.Effect<LoopLag, never, Scope.Scope> =>
  Effect.gen(function*() {
    const settings: Settings = { ...defaults, ...options }
    let state = initial(settings, performance.now())
    let timer: ReturnType<typeof setTimeout> | undefined
    const schedule = () => {
      timer = setTimeout(() => {
        state = tick(settings, state, performance.now())
        schedule()
      }, settings.intervalMillis)
      timer.unref()
    }
    yield* Effect.acquireRelease(Effect.sync(schedule), () => Effect.sync(() => clearTimeout(timer)))
    return { stalledMillis: Effect.sync(() => stalledAt(settings, state, performance.now())) }
  })
