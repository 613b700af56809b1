/**
 * Group commit: many callers' inputs written by one statement. A caller's input waits for the statement in flight
 * (if any) to finish, then goes out with every input that came in meanwhile, in one flush; so no input waits longer
 * than one statement beyond its own, and with one caller at a time every input goes out alone, at once.
 *
 * @internal
 */
import { Deferred, Effect, Exit, Queue } from "effect"
import type { Scope } from "effect"

/** A group commit of inputs `In`, each answered with an `Out` or the flush's failure `E`. */
export interface GroupCommit<In, Out, E> {
  /** Sends `input` with the next flush and waits for its answer. */
  readonly submit: (input: In) => Effect.Effect<Out, E>
}

/**
 * A group commit whose flushes run one at a time in a fiber of the current scope. `flush` answers the inputs of
 * one flush, in their order; a failed flush fails every input of it.
 */
export const make = <In, Out, E>(
  flush: (inputs: ReadonlyArray<In>) => Effect.Effect<ReadonlyArray<Out>, E>
): Effect.Effect<GroupCommit<In, Out, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const pending = yield* Queue.unbounded<readonly [In, Deferred.Deferred<Out, E>]>()
    const flushOnce = Effect.gen(function*() {
      const batch = yield* Queue.takeAll(pending)
      const exit = yield* Effect.exit(flush(batch.map(([input]) => input)))
      for (let i = 0; i < batch.length; i++) {
        const answer = batch[i]![1]
        yield* Exit.isSuccess(exit)
          ? Deferred.succeed(answer, exit.value[i]!)
          : Deferred.done(answer, exit as Exit.Exit<never, E>)
      }
    })
    yield* Effect.forkScoped(Effect.forever(flushOnce))
    return {
      submit: (input) =>
        Effect.flatMap(Deferred.make<Out, E>(), (answer) =>
          Queue.offer(pending, [input, answer] as const).pipe(Effect.andThen(Deferred.await(answer))))
    }
  })
