/**
 * The process's own time: a cumulative count of the milliseconds in which this process's event loop was not
 * waiting for I/O, so the overload signal can tell the database's time from the host's (a CPU-starved process
 * or a CPU-throttled pod sees every poll slow, whatever the database does; see `Overload.signalOfPoll`). The
 * count is non-decreasing; the process's share of a window (a poll) is the difference of two reads.
 *
 * Two sources, the better one that the platform offers ({@link make} picks it):
 *
 * - `schedstat` (Linux): the event loop's thread's own accounting in `/proc/self/schedstat`, its time on a CPU
 *   plus its time runnable but waiting for one (the scheduler's run delay, which includes a cgroup's CPU
 *   throttling). A poll's wall time is that plus the time the thread slept waiting for its sockets, so the
 *   difference is the time spent waiting for the pooler and the database, exactly, however starved the host
 *   is: a response that arrived while the process was throttled counts as the host's, a wait for a slow server
 *   as the database's. No timer runs.
 * - `timer` (elsewhere): a timer drift probe, due every `intervalMillis`; whatever it fires later than due
 *   (beyond a small tolerance) is time the loop was held up, by the host's scheduler or by the process's own
 *   work. It cannot tell a stall while the process waited for the database from one that delayed a response
 *   already there, so on a host starved for seconds at a time it may take some of a slow database's time for
 *   the host's (the claim deadline still catches a claim the database really holds up). The arithmetic is pure
 *   ({@link tick}, {@link stalledAt}); the probe runs on a real timer, unref'd, for the scope's lifetime.
 *
 * Why not `perf_hooks.monitorEventLoopDelay`: it keeps a histogram of delays (percentiles since its last
 * reset), not a sum over a window, and a window per poll would need a reset that every other reader shares.
 *
 * @since 0.3.0
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { closeSync, openSync, readSync } from "node:fs"
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

/** The defaults: a tick every 50 ms (20 timer callbacks a second), 2 ms of lateness per tick forgiven. */
const defaults: Settings = { intervalMillis: 50, toleranceMillis: 2 }

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
 * The event loop thread's own time from the text of `/proc/self/schedstat` (nanoseconds on a CPU, nanoseconds
 * runnable but waiting for one, timeslices), in milliseconds: the two first fields summed; `undefined` when the
 * text is not that.
 *
 * @since 0.3.0
 * @category decisions
 */
export const schedstatMillis = (text: string): number | undefined => {
  const fields = text.trim().split(/\s+/)
  if (fields.length < 2) return undefined
  const onCpu = Number(fields[0])
  const runDelay = Number(fields[1])
  return Number.isFinite(onCpu) && Number.isFinite(runDelay) && onCpu >= 0 && runDelay >= 0
    ? (onCpu + runDelay) / 1e6
    : undefined
}

/**
 * Where the count comes from (see the module's documentation).
 *
 * @since 0.3.0
 * @category models
 */
export type Source = "schedstat" | "timer"

/**
 * A running probe.
 *
 * @since 0.3.0
 * @category models
 */
export interface LoopLag {
  readonly source: Source
  /** The process's own time counted since the probe started (milliseconds, non-decreasing). */
  readonly stalledMillis: Effect.Effect<number>
}

const schedstatPath = "/proc/self/schedstat"

/**
 * `/proc/self/schedstat`, opened once for the probe's lifetime: each read is one `pread` at offset 0 (procfs
 * makes the text afresh), not an open, a read and a close; it is read around every claim, so this is on the
 * deriver's path once per unit.
 */
const openSchedstat = (): number | undefined => {
  try {
    return openSync(schedstatPath, "r")
  } catch {
    return undefined
  }
}

/**
 * How long a `schedstat` reading is reused: a reading is at most this much behind, against a slow-poll threshold of
 * seconds (`Overload.Settings.slowPollMillis`).
 */
const rereadMillis = 1

const readSchedstat = (fd: number, buffer: Buffer): number | undefined => {
  try {
    return schedstatMillis(buffer.toString("latin1", 0, readSync(fd, buffer, 0, buffer.length, 0)))
  } catch {
    return undefined
  }
}

/**
 * Starts a probe for the scope's lifetime: `/proc/self/schedstat` when it is readable (Linux; `source` forces
 * one), otherwise the timer drift probe (monotonic clock, `performance.now()`, its timer unref'd: it never
 * keeps a process alive).
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (
  options?: Partial<Settings> & { readonly source?: Source | undefined }
): Effect.Effect<LoopLag, never, Scope.Scope> =>
  Effect.gen(function*() {
    const fd = options?.source === "timer"
      ? undefined
      : yield* Effect.acquireRelease(
        Effect.sync(openSchedstat),
        (opened) => Effect.sync(() => opened === undefined ? undefined : closeSync(opened))
      )
    const buffer = Buffer.alloc(256)
    const atStart = fd === undefined ? undefined : readSchedstat(fd, buffer)
    if (fd !== undefined && atStart !== undefined) {
      let last = 0
      let readAt = Number.NEGATIVE_INFINITY
      return {
        source: "schedstat" as const,
        // read again only after `rereadMillis` (a read is a system call, and claiming along asks once per unit)
        stalledMillis: Effect.sync(() => {
          const at = performance.now()
          if (at - readAt < rereadMillis) return last
          readAt = at
          const now = readSchedstat(fd, buffer)
          if (now !== undefined && now - atStart > last) last = now - atStart
          return last
        })
      }
    }
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
    return { source: "timer" as const, stalledMillis: Effect.sync(() => stalledAt(settings, state, performance.now())) }
  })
