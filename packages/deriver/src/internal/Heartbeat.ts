/**
 * One heartbeat for every unit a deriver holds: each beat renews all their ownership rows in one statement, so a
 * unit held for a few milliseconds costs the heartbeat nothing (no fiber, no timer of its own), and one held through
 * a long handler or an outage is renewed at most a beat interval apart (at most a third of the stale timeout, see
 * `Scheduling.heartbeatDelay`), as when each unit beat for itself.
 *
 * A beat that finds a claim's row gone (a stale cleanup took the unit over) gives the unit up: when its worker is in
 * a handler, that handler is interrupted at once ({@link Heartbeat.hold} ends with `"lost"`); otherwise the unit is
 * marked and its worker stops before its next handler ({@link Heartbeat.handling}). Its statements are fenced either
 * way. Only a handler is interrupted: a unit's own record may be releasing its row while a beat runs (the beat then
 * finds the row gone), and interrupting that record could strand the units it claimed along in the same statement.
 *
 * @internal
 */
import { Cause, Duration, Effect, Exit, Fiber } from "effect"
import type { Scope } from "effect"

/**
 * A claim as the heartbeat sees it (the deriver's are `Queue.Claim`s): its ownership row's id.
 *
 * @internal
 */
export interface Claim {
  readonly id: string
}

/**
 * What a beat learns: the ids of the claims whose rows it renewed (the others are gone).
 *
 * @internal
 */
export type Beat<C extends Claim, E> = (claims: ReadonlyArray<C>) => Effect.Effect<ReadonlySet<string>, E>

/**
 * The heartbeat of one deriver.
 *
 * @internal
 */
export interface Heartbeat<C extends Claim> {
  /**
   * Runs `self` with `claim` held under the heartbeat; `"lost"` when a beat found the claim gone while `self` was in
   * a handler (`self` is interrupted).
   */
  readonly hold: <A, E, R>(claim: C, self: Effect.Effect<A, E, R>) => Effect.Effect<A | "lost", E, R>
  /**
   * Runs a handler of the held `claim`: `"lost"` without running it when a beat found the claim gone already;
   * while it runs, a beat that finds the claim gone interrupts it.
   */
  readonly handling: <A, E, R>(claim: C, self: Effect.Effect<A, E, R>) => Effect.Effect<A | "lost", E, R>
  /** The claims held now (for tests and observers). */
  readonly held: Effect.Effect<number>
}

interface Entry<C extends Claim> {
  readonly claim: C
  /** The fiber the unit runs in (set once it is forked): what a beat interrupts. */
  fiber: Fiber.Fiber<unknown, unknown> | undefined
  inHandler: boolean
  gone: boolean
}

/**
 * Starts the heartbeat in the current scope: after each `delay` (drawn anew each time), one `beat` of every claim held
 * then, when there is one; a failed beat goes to `onFailure` and the next one tries again at its time.
 *
 * @internal
 */
export const make = <C extends Claim, E>(options: {
  readonly beat: Beat<C, E>
  readonly delay: Effect.Effect<number>
  readonly onFailure: (error: E, claims: number) => Effect.Effect<void>
}): Effect.Effect<Heartbeat<C>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const entries = new Map<C, Entry<C>>()

    const giveUp = (entry: Entry<C>) => {
      entry.gone = true
      if (entry.inHandler) entry.fiber?.interruptUnsafe()
    }

    const beatOnce = Effect.suspend(() => {
      const beating = [...entries.values()]
      if (beating.length === 0) return Effect.void
      return options.beat(beating.map(({ claim }) => claim)).pipe(
        Effect.matchEffect({
          onFailure: (error) => options.onFailure(error, beating.length),
          onSuccess: (renewed) =>
            Effect.sync(() => {
              for (const entry of beating) {
                if (!renewed.has(entry.claim.id) && entries.get(entry.claim) === entry) {
                  giveUp(entry)
                }
              }
            })
        })
      )
    })
    yield* Effect.forkScoped(
      Effect.forever(
        Effect.andThen(Effect.flatMap(options.delay, (millis) => Effect.sleep(Duration.millis(millis))), beatOnce)
      )
    )

    const hold = <A, E2, R>(claim: C, self: Effect.Effect<A, E2, R>): Effect.Effect<A | "lost", E2, R> =>
      Effect.suspend(() => {
        const entry: Entry<C> = { claim, fiber: undefined, inHandler: false, gone: false }
        entries.set(claim, entry)
        // a fiber of its own (started at once: no hop through the scheduler) that a beat can interrupt; interrupting
        // this one interrupts the unit and waits for it
        return Effect.forkChild(self, { startImmediately: true }).pipe(
          Effect.flatMap((fiber) => {
            entry.fiber = fiber
            return Effect.onInterrupt(Fiber.await(fiber), () => Fiber.interrupt(fiber))
          }),
          Effect.flatMap((exit): Effect.Effect<A | "lost", E2> =>
            Exit.isFailure(exit) && entry.gone && Cause.hasInterruptsOnly(exit.cause) ? Effect.succeed("lost") : exit
          ),
          Effect.ensuring(Effect.sync(() => {
            if (entries.get(claim) === entry) entries.delete(claim)
          }))
        )
      })

    const handling = <A, E2, R>(claim: C, self: Effect.Effect<A, E2, R>): Effect.Effect<A | "lost", E2, R> =>
      Effect.suspend((): Effect.Effect<A | "lost", E2, R> => {
        const entry = entries.get(claim)
        if (entry === undefined) return self
        if (entry.gone) return Effect.succeed("lost" as const)
        entry.inHandler = true
        return Effect.ensuring(
          self,
          Effect.sync(() => {
            entry.inHandler = false
          })
        )
      })

    return { hold, handling, held: Effect.sync(() => entries.size) }
  })
