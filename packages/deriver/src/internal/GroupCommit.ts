/**
 * Group commit: many callers' inputs written by one statement. A caller that finds no flush in flight flushes its own
 * input at once, in its own fiber (one worker finishing at a time pays no hand-over between fibers); a caller that
 * finds one in flight waits for it, then goes out with every input that came in meanwhile, in one flush started by
 * the caller whose flush just ended (in a fiber of its own). So no input waits longer than one statement beyond its own.
 *
 * After a flush, the next one goes out before the flush's callers are answered, and the answers let the event loop
 * turn every {@link answerSliceMicros} µs. Answering a caller runs it on at once (a `Deferred` resumes its waiters in
 * place): its metrics, its next unit, its next handler. Answered all at once, a batch of 30–60 callers ran 2 ms or
 * more without a break. The next statement waited behind them, and so did every timer due meanwhile: the handlers'
 * own sleeps and I/O among them. In issue #47's harness at 6,000 jobs/s offered, a handler's 1 ms timer took 2.1–2.4
 * ms with all at once, and 1.33–1.40 ms with the answers in slices (`docs/results/job-queue-harness.md`).
 *
 * @internal
 */
import { Deferred, Effect, Exit } from "effect"

/**
 * How long answering callers runs before it yields, in µs: a timer that comes due meanwhile waits for the rest of the
 * slice and the caller being answered, no longer. Against slices of 250 µs (the figures above), a yield after every
 * caller kept a handler's 1 ms timer at 1.09–1.15 ms, but cost the process 13–20 % more CPU a job at 2,000 jobs/s
 * where the slices cost 2–11 %.
 *
 * @internal
 */
export const answerSliceMicros = 250

/**
 * Answers `batch` from the flush's `exit`: a yield first (a statement waiting to be sent goes first), then the callers
 * in order, yielding again whenever a slice of {@link answerSliceMicros} has passed (the `Clock`'s monotonic time).
 */
const answer = <Out, E>(
  batch: ReadonlyArray<readonly [unknown, Deferred.Deferred<Out, E>]>,
  exit: Exit.Exit<ReadonlyArray<Out>, E>
): Effect.Effect<void> =>
  Effect.clockWith((clock) => {
    const slice = BigInt(answerSliceMicros) * 1000n
    let sliceStart = 0n
    const newSlice = Effect.andThen(
      Effect.yieldNow,
      Effect.sync(() => void (sliceStart = clock.monotonicTimeNanosUnsafe()))
    )
    return Effect.andThen(
      newSlice,
      Effect.forEach(batch, ([, deferred], i) => {
        const done = Exit.isSuccess(exit)
          ? Deferred.succeed(deferred, exit.value[i]!)
          : Deferred.done(deferred, exit as Exit.Exit<never, E>)
        return clock.monotonicTimeNanosUnsafe() - sliceStart < slice ? done : Effect.andThen(newSlice, done)
      }, { discard: true })
    )
  })

/** A group commit of inputs `In`, each answered with an `Out` or the flush's failure `E`. */
export interface GroupCommit<In, Out, E> {
  /** Sends `input` with the next flush and waits for its answer. */
  readonly submit: (input: In) => Effect.Effect<Out, E>
}

/**
 * A group commit whose flushes run one at a time, each in a detached fiber of its own; they stop when nothing waits.
 * `flush` answers the inputs of one flush, in their order; a failed flush fails every input of it.
 */
export const make = <In, Out, E>(
  flush: (inputs: ReadonlyArray<In>) => Effect.Effect<ReadonlyArray<Out>, E>
): Effect.Effect<GroupCommit<In, Out, E>> =>
  Effect.gen(function*() {
    let flushing = false
    let waiting: Array<readonly [In, Deferred.Deferred<Out, E>]> = []
    /**
     * After a flush: what came in meanwhile goes out at once, in a fiber that runs until its statement waits (sent,
     * or waiting for its connection); that fiber then answers its own callers, after sending the flush that follows
     * it. Detached: a scope that is closing (a shutdown, whose workers wait for these answers within their grace)
     * would interrupt a fiber forked into it at once.
     */
    const next: Effect.Effect<void> = Effect.suspend(() => {
      if (waiting.length === 0) {
        flushing = false
        return Effect.void
      }
      const batch = waiting
      waiting = []
      const flushed = Effect.exit(flush(batch.map(([input]) => input))).pipe(
        Effect.flatMap((exit) => Effect.andThen(next, answer(batch, exit)))
      )
      return Effect.asVoid(Effect.forkDetach(flushed, { startImmediately: true }))
    })
    return {
      submit: (input) =>
        Effect.suspend(() => {
          if (!flushing) {
            flushing = true
            return flush([input]).pipe(
              Effect.map((outs) => outs[0]!),
              Effect.ensuring(next)
            )
          }
          return Effect.flatMap(Deferred.make<Out, E>(), (answer) => {
            waiting.push([input, answer] as const)
            return Deferred.await(answer)
          })
        })
    }
  })
