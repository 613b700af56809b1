/**
 * The task handler registry: task type → Effect handler. A worker looks an item's handler up here.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import type * as Queue from "./Queue.ts"

/**
 * Processes one queue item. Success marks the item processed; a failure marks it with the error (unless the
 * failure is a database condition, which leaves it for a later cycle). Handlers run with no connection
 * held, and the outcomes of a batch (`DERIVER_BATCH_SIZE` items) are recorded together after its last
 * handler, in one statement.
 *
 * Delivery is at least once, so handlers must be idempotent: an item whose handler ran but whose outcome
 * was not yet recorded (the process died, the record statement failed, or the unit was taken over by a
 * stale cleanup) is handled again, by this instance or another; so are the items of a batch after a
 * database condition stopped it. An item is never marked processed unless its handler ran to completion.
 *
 * @since 0.1.0
 */
export type Handler<R = never> = (item: Queue.Item) => Effect.Effect<unknown, unknown, R>

/**
 * A registry of handlers by task type.
 *
 * @since 0.1.0
 */
export interface Handlers<R = never> {
  readonly byTaskType: ReadonlyMap<string, Handler<R>>
}

/**
 * A registry from a record of task type → handler.
 *
 * @since 0.1.0
 */
export const make = <R = never>(handlers: Readonly<Record<string, Handler<R>>>): Handlers<R> => ({
  byTaskType: new Map(Object.entries(handlers))
})

/**
 * The empty registry.
 *
 * @since 0.1.0
 */
export const empty: Handlers<never> = { byTaskType: new Map() }

/**
 * A registry with one more handler (replacing an existing one for the same task type).
 *
 * @since 0.1.0
 */
export const add = <R, R2>(self: Handlers<R>, taskType: string, handler: Handler<R2>): Handlers<R | R2> => ({
  byTaskType: new Map<string, Handler<R | R2>>([...self.byTaskType, [taskType, handler]])
})

/**
 * The union of registries; later ones win on a shared task type.
 *
 * @since 0.1.0
 */
export const merge = <R>(...registries: ReadonlyArray<Handlers<R>>): Handlers<R> => ({
  byTaskType: new Map(registries.flatMap((registry) => [...registry.byTaskType]))
})

/**
 * The handler of a task type, if any.
 *
 * @since 0.1.0
 */
export const get = <R>(self: Handlers<R>, taskType: string): Handler<R> | undefined => self.byTaskType.get(taskType)
