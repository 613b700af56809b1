/**
 * The history of a run, as clients saw it: every message write they attempted and what they learned of it.
 * One operation per logical write (its `Idempotency-Key` retries are the same operation), recorded when it is
 * invoked and completed with one of three outcomes, as in Jepsen: `acknowledged` (the write happened, so it
 * must be stored exactly once), `refused` (it certainly did not, so it must not be stored), `unknown` (a
 * timeout, a 503, a dropped connection: stored once or not at all). An operation never completed counts as
 * `unknown`.
 *
 * @since 0.1.0
 */
import { Effect, Exit, Option } from "effect"

/**
 * One message write: where it goes and what it says. The checker finds it in the database by workspace,
 * session, peer and content; give each operation its own content.
 *
 * @since 0.1.0
 */
export interface Request {
  /** Who sent it (a label, for the report). */
  readonly client: string
  readonly workspace: string
  readonly session: string
  readonly peer: string
  readonly content: string
}

/**
 * What the client learned of a write.
 *
 * @since 0.1.0
 */
export type Outcome = "acknowledged" | "refused" | "unknown"

/**
 * A recorded operation; `outcome` is `pending` until completed.
 *
 * @since 0.1.0
 */
export interface Operation extends Request {
  readonly index: number
  readonly outcome: Outcome | "pending"
  /** Why, when not acknowledged (an error tag, a status). */
  readonly detail: string
}

/**
 * The history: a log that any number of fibers append to.
 *
 * @since 0.1.0
 */
export interface History {
  readonly operations: ReadonlyArray<Operation>
  /** Records an invocation; returns its index for {@link History.complete}. */
  readonly invoke: (request: Request) => number
  /** Records the outcome of an invoked operation (the last call wins). */
  readonly complete: (index: number, outcome: Outcome, detail?: string) => void
}

/**
 * An empty history.
 *
 * @since 0.1.0
 */
export const make = (): History => {
  const operations: Array<Operation> = []
  return {
    operations,
    invoke: (request) => operations.push({ ...request, index: operations.length, outcome: "pending", detail: "" }) - 1,
    complete: (index, outcome, detail = "") => {
      const operation = operations[index]
      if (operation !== undefined) operations[index] = { ...operation, outcome, detail }
    }
  }
}

/**
 * How a finished write maps to an outcome. The default: success is `acknowledged`, any failure `unknown`
 * (only the caller knows which failures prove that nothing was written).
 *
 * @since 0.1.0
 */
export type Classify<A, E> = (exit: Exit.Exit<A, E>) => Outcome

const unknownOnFailure = <A, E>(exit: Exit.Exit<A, E>): Outcome => Exit.isSuccess(exit) ? "acknowledged" : "unknown"

/**
 * Runs one write and records it: invoked before, completed with `classify(exit)` after (an interruption is
 * `unknown`). The write's own result passes through unchanged.
 *
 * @since 0.1.0
 */
export const record = <A, E, R>(
  history: History,
  request: Request,
  write: Effect.Effect<A, E, R>,
  classify: Classify<A, E> = unknownOnFailure
): Effect.Effect<A, E, R> => recordAll(history, [request], write, classify)

/**
 * {@link record} for a write that carries several messages (one append of a batch): one operation per message,
 * all with the write's outcome.
 *
 * @since 0.1.0
 */
export const recordAll = <A, E, R>(
  history: History,
  requests: ReadonlyArray<Request>,
  write: Effect.Effect<A, E, R>,
  classify: Classify<A, E> = unknownOnFailure
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    const indices = requests.map((request) => history.invoke(request))
    return Effect.onExit(write, (exit) =>
      Effect.sync(() => {
        const outcome = Exit.hasInterrupts(exit) ? "unknown" : classify(exit)
        for (const index of indices) history.complete(index, outcome, failureDetail(exit))
      }))
  })

const failureDetail = <A, E>(exit: Exit.Exit<A, E>): string => {
  if (Exit.isSuccess(exit)) return ""
  if (Exit.hasInterrupts(exit)) return "interrupted"
  const error = Option.getOrUndefined(Exit.findErrorOption(exit)) as
    | { readonly _tag?: unknown; readonly message?: unknown }
    | undefined
  if (error === undefined) return "defect"
  const tag = typeof error._tag === "string" ? error._tag : "error"
  const message = typeof error.message === "string" && error.message !== "" ? `: ${error.message}` : ""
  return `${tag}${message}`.slice(0, 200)
}
