/**
 * Group commit: many callers' inputs written by one statement. A caller that finds no flush in flight flushes its own
 * input at once, in its own fiber (one worker finishing at a time pays no hand-over between fibers); a caller that
 * finds one in flight waits for it, then goes out with every input that came in meanwhile, in one flush started by
 * the caller whose flush just ended (in a fiber of its own). So no input waits longer than one statement beyond its own.
 *
 * @internal
 */
import { Deferred, Effect, Exit } from "effect"

/** A group commit of inputs `In`, each answered with an `Out` or the flush's failure `E`. */
export interface GroupCommit<In, Out, E> {
  /** Sends `input` with the next flush and waits for its answer. */
  readonly submit: (input: In) => Effect.Effect<Out, E>
}

/**
 * A group commit whose flushes run one at a time; the flushes of waiting inputs run in a detached fiber that ends
 * when nothing waits.
 * `flush` answers the inputs of one flush, in their order; a failed flush fails every input of it.
 */
export const make = <In, Out, E>(
  flush: (inputs: ReadonlyArray<In>) => Effect.Effect<ReadonlyArray<Out>, E>
): Effect.Effect<GroupCommit<In, Out, E>> =>
  Effect.gen(function*() {
    let flushing = false
    let waiting: Array<readonly [In, Deferred.Deferred<Out, E>]> = []
    /** Flushes what waits, batch after batch, until nothing does; then no flush is in flight. */
    const drain: Effect.Effect<void> = Effect.suspend(() => {
      if (waiting.length === 0) {
        flushing = false
        return Effect.void
      }
      const batch = waiting
      waiting = []
      return Effect.exit(flush(batch.map(([input]) => input))).pipe(
        Effect.flatMap((exit) =>
          Effect.forEach(batch, ([, answer], i) =>
            Exit.isSuccess(exit)
              ? Deferred.succeed(answer, exit.value[i]!)
              : Deferred.done(answer, exit as Exit.Exit<never, E>), { discard: true })
        ),
        Effect.andThen(drain)
      )
    })
    /**
     * After a caller's own flush: what came in meanwhile goes out in a fiber of its own. A detached one: it ends when
     * nothing waits, and a scope that is closing (a shutdown, whose workers wait for these answers within their
     * grace) would interrupt a fiber forked into it at once.
     */
    const handOff = Effect.suspend(() => {
      if (waiting.length === 0) {
        flushing = false
        return Effect.void
      }
      return Effect.asVoid(Effect.forkDetach(drain))
    })
    return {
      submit: (input) =>
        Effect.suspend(() => {
          if (!flushing) {
            flushing = true
            return flush([input]).pipe(
              Effect.map((outs) => outs[0]!),
              Effect.ensuring(handOff)
            )
          }
          return Effect.flatMap(Deferred.make<Out, E>(), (answer) => {
            waiting.push([input, answer] as const)
            return Deferred.await(answer)
          })
        })
    }
  })
