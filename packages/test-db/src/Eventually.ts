/**
 * Waiting for an event instead of sleeping for a guessed time: polls a check on the real clock until it holds,
 * and past a deadline dies naming what was awaited. The deadline bounds a stuck run; it is not a speed bound, so
 * it is generous, and a loaded machine only makes the wait longer, never the test wrong.
 *
 * The pause between checks and the deadline are real time even under Effect's `TestClock` (a check that waits
 * for the database or another process must not wait for a clock nobody moves). {@link advancing} is the wait for
 * code that sleeps on the `TestClock` between its real I/O: it moves the clock step by step until the check holds.
 */
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"

/** How long to wait, and how often to look. */
export interface Options {
  /** The deadline (default 30 s). */
  readonly within?: Duration.Input
  /** The pause between two checks (default 20 ms). */
  readonly every?: Duration.Input
}

/** What was awaited, for the failure: a text, or a function called at the deadline (say, a process's output). */
export type What = string | (() => string)

/** A pause on the real clock, interruptible. */
const pause = (millis: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

const millis = (input: Duration.Input) => Duration.toMillis(Duration.fromInputUnsafe(input))

/** The deadline and the pause of `options`, in milliseconds (defaults 30 s and 20 ms). */
const timing = (options: Options) => ({
  within: millis(options.within ?? "30 seconds"),
  every: millis(options.every ?? "20 millis")
})

/**
 * Polls `check` until it yields a value other than `undefined`, and returns that value. Past the deadline it dies
 * with `timed out after N ms waiting for <what>`. A failure of `check` ends the wait with that failure.
 */
export const defined = <A, E, R>(
  what: What,
  check: Effect.Effect<A | undefined, E, R>,
  options: Options = {}
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const { every, within } = timing(options)
    const deadline = performance.now() + within
    for (;;) {
      const value = yield* check
      if (value !== undefined) return value
      if (performance.now() >= deadline) {
        return yield* Effect.die(
          new Error(`timed out after ${within} ms waiting for ${typeof what === "string" ? what : what()}`)
        )
      }
      yield* pause(every)
    }
  })

/** Polls `check` until it is true ({@link defined}'s deadline and failure). */
export const until = <E, R>(what: What, check: Effect.Effect<boolean, E, R>, options: Options = {}) =>
  Effect.asVoid(defined(what, Effect.map(check, (done) => (done ? true : undefined)), options))

/**
 * Polls `effect` until `done` holds for its value, and returns that value ({@link defined}'s deadline; the
 * failure names the last value seen as well).
 */
export const satisfying = <A, E, R>(
  what: What,
  effect: Effect.Effect<A, E, R>,
  done: (value: A) => boolean,
  options: Options = {}
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let last: { readonly value: A } | undefined
    return Effect.map(
      defined(
        () =>
          `${typeof what === "string" ? what : what()} (last seen: ${last === undefined ? "none" : show(last.value)})`,
        Effect.map(effect, (value) => {
          last = { value }
          return done(value) ? { value } : undefined
        }),
        options
      ),
      (found) => found.value
    )
  })

const show = (value: unknown) => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** How {@link advancing} moves the test clock, beside the real-time deadline of {@link Options}. */
export interface Advancing<E, R> extends Options {
  /** How far the clock moves between two checks. */
  readonly step: Duration.Input
  /** Runs before each check: real work let settle first (say, until the database has answered); none by default. */
  readonly settle?: Effect.Effect<void, E, R> | undefined
  /**
   * The most test time to move: when the check does not hold after the clock moved this far, the wait dies
   * naming it (what the test asserts is due by then). None by default: the real-time deadline bounds the wait.
   */
  readonly testTime?: Duration.Input | undefined
}

/**
 * Moves Effect's `TestClock` by `step` until `check` holds: after `settle`, checks; when it does not hold yet,
 * moves the clock, pauses `every` on the real clock (default 20 ms; 0: none, for a `settle` that waits for the
 * real work itself) and checks again. For code whose sleeps are on the test clock and whose steps between them are
 * real I/O: one move made while a step is still in flight (a loaded machine) would leave the sleep that step starts
 * waiting for a clock nobody moves, where moving until the check holds cannot. Past `testTime` of test time, or the
 * real-time deadline (default 30 s), it dies naming what was awaited. A failure of `settle` or `check` ends it.
 */
export const advancing = <E, R>(
  what: What,
  check: Effect.Effect<boolean, E, R>,
  options: Advancing<E, R>
): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    const step = millis(options.step)
    const testTime = options.testTime === undefined ? Number.POSITIVE_INFINITY : millis(options.testTime)
    const { every, within } = timing(options)
    const deadline = performance.now() + within
    const named = () => (typeof what === "string" ? what : what())
    for (let moved = 0;; moved += step) {
      if (options.settle !== undefined) yield* options.settle
      if (yield* check) return
      if (moved + step > testTime) {
        return yield* Effect.die(new Error(`not done within ${testTime} ms of test time: ${named()}`))
      }
      if (performance.now() >= deadline) {
        return yield* Effect.die(
          new Error(`timed out after ${within} ms (${moved} ms of test time) waiting for ${named()}`)
        )
      }
      yield* TestClock.adjust(step)
      if (every > 0) yield* pause(every)
    }
  })
