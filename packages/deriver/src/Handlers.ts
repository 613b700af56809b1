/**
 * The task handler registry: task type → Effect handler. A worker looks an item's handler up here.
 *
 * @since 0.1.0
 */
import type { InvalidParameter } from "@resilience/parameters"
import { Data, Effect, Predicate } from "effect"
import type * as Queue from "./Queue.ts"
import * as Retries from "./Retries.ts"

/**
 * Processes one queue item. Success marks the item processed, unless it succeeds with a stated outcome
 * ({@link failed}, {@link retry}); raising {@link Retry} asks for a retry, {@link Failed} marks the item with its
 * error for good; any other failure marks it with the error (or, when the task type's policy says
 * `unknownErrors: "retry"`, retries it), unless the failure is a database condition, which leaves it for a later
 * cycle. A retry waits the task type's backoff (see `Retries`); after its last attempt the item is a dead letter. Handlers run with no connection
 * held, and the outcomes of a batch (`DERIVER_BATCH_SIZE` items) are recorded together after its last
 * handler, in one statement.
 *
 * Delivery is at least once, so handlers must be idempotent: an item whose handler ran but whose outcome
 * was not yet recorded (the process died, the record statement failed, or the unit was taken over by a
 * stale cleanup) is handled again, by this instance or another; so are the items of a batch after a
 * database condition stopped it. An item is never marked processed unless its handler ran to completion.
 *
 * @since 0.1.0
 * @category models
 */
export type Handler<R = never> = (item: Queue.Item) => Effect.Effect<unknown, unknown, R>

/**
 * A registry of handlers by task type.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handlers<R = never> {
  readonly byTaskType: ReadonlyMap<string, Handler<R>>
  /**
   * Retry policies by task type; a task type without one has `Retries.defaults`.
   *
   * @since 0.3.0
   */
  readonly retries?: ReadonlyMap<string, Retries.Settings> | undefined
}

/**
 * A handler's transient failure, raised as its error: run the item again after the task type's backoff, or no
 * earlier than `at` (epoch milliseconds or a `Date`: a provider's `Retry-After`).
 *
 * @since 0.3.0
 * @category errors
 */
export class Retry extends Data.TaggedError("HandlerRetry")<{
  readonly reason: unknown
  readonly at?: number | Date | undefined
}> {}

/**
 * A handler's permanent failure, raised as its error: mark the item with `reason` and never run it again (what
 * any unstated error means unless the task type's policy retries unknown errors).
 *
 * @since 0.3.0
 * @category errors
 */
export class Failed extends Data.TaggedError("HandlerFailed")<{ readonly reason: unknown }> {}

const ResultTypeId = "~@resilience/deriver/Handlers/Result"

/**
 * An outcome a handler can return instead of raising: done, failed for good, or retry (see {@link done},
 * {@link failed}, {@link retry}). Any other success value means done.
 *
 * @since 0.3.0
 * @category models
 */
export type Result =
  | { readonly [ResultTypeId]: typeof ResultTypeId; readonly _tag: "Done" }
  | { readonly [ResultTypeId]: typeof ResultTypeId; readonly _tag: "Failed"; readonly reason: unknown }
  | {
    readonly [ResultTypeId]: typeof ResultTypeId
    readonly _tag: "Retry"
    readonly reason: unknown
    readonly at?: number | Date | undefined
  }

/**
 * The item is done.
 *
 * @since 0.3.0
 * @category constructors
 */
export const done: Result = { [ResultTypeId]: ResultTypeId, _tag: "Done" }

/**
 * The item failed for good with `reason`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const failed = (reason: unknown): Result => ({ [ResultTypeId]: ResultTypeId, _tag: "Failed", reason })

/**
 * Run the item again, after the backoff or no earlier than `at`.
 *
 * @since 0.3.0
 * @category constructors
 */
export const retry = (reason: unknown, at?: number | Date): Result => ({
  [ResultTypeId]: ResultTypeId,
  _tag: "Retry",
  reason,
  at
})

/**
 * Whether a handler's success value is a stated {@link Result}.
 *
 * @since 0.3.0
 * @category predicates
 */
export const isResult = (value: unknown): value is Result => Predicate.hasProperty(value, ResultTypeId)

/**
 * A registry whose `taskType` has its own retry policy (validated; the error names the field).
 *
 * @since 0.3.0
 * @category effects
 */
export const withRetries = <R>(
  self: Handlers<R>,
  taskType: string,
  options: Retries.Options
): Effect.Effect<Handlers<R>, InvalidParameter.InvalidParameter> =>
  Effect.map(Retries.settings(options), (settings) => ({
    ...self,
    retries: new Map([...(self.retries ?? []), [taskType, settings]])
  }))

/**
 * The retry policy of a task type.
 *
 * @since 0.3.0
 * @category decisions
 */
export const retriesOf = <R>(self: Handlers<R>, taskType: string): Retries.Settings =>
  self.retries?.get(taskType) ?? Retries.defaults

/**
 * A registry from a record of task type → handler.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <R = never>(handlers: Readonly<Record<string, Handler<R>>>): Handlers<R> => ({
  byTaskType: new Map(Object.entries(handlers))
})

/**
 * The empty registry.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: Handlers<never> = { byTaskType: new Map() }

/**
 * A registry with one more handler (replacing an existing one for the same task type).
 *
 * @since 0.1.0
 * @category decisions
 */
export const add = <R, R2>(self: Handlers<R>, taskType: string, handler: Handler<R2>): Handlers<R | R2> => ({
  ...self,
  byTaskType: new Map<string, Handler<R | R2>>([...self.byTaskType, [taskType, handler]])
})

/**
 * The union of registries (handlers and retry policies); later ones win on a shared task type.
 *
 * @since 0.1.0
 * @category decisions
 */
export const merge = <R>(...registries: ReadonlyArray<Handlers<R>>): Handlers<R> => ({
  byTaskType: new Map(registries.flatMap((registry) => [...registry.byTaskType])),
  retries: new Map(registries.flatMap((registry) => [...(registry.retries ?? [])]))
})

/**
 * The handler of a task type, if any.
 *
 * @since 0.1.0
 * @category decisions
 */
export const get = <R>(self: Handlers<R>, taskType: string): Handler<R> | undefined => self.byTaskType.get(taskType)
