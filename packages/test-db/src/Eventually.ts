/**
 * Waiting for an event instead of sleeping for a guessed time: polls a check on the real clock until it holds,
 * and past a deadline dies naming what was awaited. The deadline bounds a stuck run; it is not a speed bound, so
 * it is generous, and a loaded machine only makes the wait longer, never the test wrong.
 *
 * The pause between checks and the deadline are real time even under Effect's `TestClock` (a check that waits
 * for the database or another process must not wait for a clock nobody moves).
 */
import { Duration, Effect } from "effect"

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
    const within = millis(options.within ?? "30 seconds")
    const every = millis(options.every ?? "20 millis")
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
