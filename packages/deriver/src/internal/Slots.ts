/**
 * The handler slots of one deriver: at most `size` handlers run at once, over the units it holds (its workers plus
 * the units claimed ahead). A handler waits for a slot in one of two lines, and a freed slot goes to the first of
 * the `first` line before any of the `later` line: the deriver puts there a unit already running (its next item)
 * and a retry (an item whose earlier attempt failed and whose time has come), so units claimed ahead that have not
 * started wait behind them instead of delaying a due retry or a running unit by the whole local queue. Within a
 * line, first come, first served.
 *
 * @internal
 */
import { Effect } from "effect"

/**
 * Which line a handler waits in for its slot.
 *
 * @internal
 */
export type Line = "first" | "later"

/**
 * The slots.
 *
 * @internal
 */
export interface Slots {
  /** Runs `self` in a slot, waiting in `line` for one; the slot is freed when `self` ends, however it ends. */
  readonly withSlot: (line: Line) => <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Slots free now, and handlers waiting in each line (for tests and observers). */
  readonly snapshot: Effect.Effect<{ readonly free: number; readonly first: number; readonly later: number }>
}

interface Waiter {
  readonly resume: () => void
  granted: boolean
}

/**
 * `size` slots, all free.
 *
 * @internal
 */
export const make = (size: number): Effect.Effect<Slots> =>
  Effect.sync(() => {
    let free = size
    const lines: Record<Line, Array<Waiter>> = { first: [], later: [] }

    /** A slot was freed: to the first waiter of the first line, else of the later line, else it stays free. */
    const pass = () => {
      const next = lines.first.shift() ?? lines.later.shift()
      if (next === undefined) {
        free += 1
        return
      }
      next.granted = true
      next.resume()
    }

    const acquire = (line: Line) =>
      Effect.callback<void>((resume) => {
        if (free > 0) {
          free -= 1
          resume(Effect.void)
          return
        }
        // resumed in a microtask, not inside the fiber that freed the slot; if this waiter is interrupted in between,
        // its cleanup below passes the slot on and the resume is ignored
        const waiter: Waiter = { resume: () => queueMicrotask(() => resume(Effect.void)), granted: false }
        lines[line].push(waiter)
        return Effect.sync(() => {
          if (waiter.granted) pass()
          else lines[line].splice(lines[line].indexOf(waiter), 1)
        })
      })

    const withSlot = (line: Line) => <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(restore(acquire(line)), () => Effect.ensuring(restore(self), Effect.sync(pass)))
      )

    return {
      withSlot,
      snapshot: Effect.sync(() => ({ free, first: lines.first.length, later: lines.later.length }))
    }
  })
