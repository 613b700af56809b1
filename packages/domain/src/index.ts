/**
 * `@resilience/domain`: the example product both apps share: workspaces, sessions, messages and the peer
 * representations the deriver derives from them.
 *
 * @since 0.1.0
 */

/**
 * Migrations and the handler registry.
 *
 * @since 0.1.0
 */
export * as Domain from "./Domain.ts"

/**
 * Storing messages (and enqueuing their derivation).
 *
 * @since 0.1.0
 */
export * as Messages from "./Messages.ts"

/**
 * Idempotency keys of writes: once per key, replay of the first response, pruning.
 *
 * @since 0.1.0
 */
export * as Idempotency from "./Idempotency.ts"

/**
 * The domain's values as schemas (server free; also `@resilience/domain/Model`).
 *
 * @since 0.1.0
 */
export { Model } from "@resilience/model"

/**
 * Queue counts per workspace.
 *
 * @since 0.1.0
 */
export * as QueueStatus from "./QueueStatus.ts"

/**
 * Reading derived representations.
 *
 * @since 0.1.0
 */
export * as Representations from "./Representations.ts"

/**
 * The `representation` task: folding a peer's new messages into its representation (formerly `Representation`,
 * beside `Representations`, the reading: one name, one meaning).
 *
 * @since 0.3.0
 */
export * as RepresentationTask from "./RepresentationTask.ts"

/**
 * The terms of a text, as the representation counts them.
 *
 * @since 0.1.0
 */
export * as Terms from "./Terms.ts"

/**
 * Workspaces and their tokens.
 *
 * @since 0.1.0
 */
export * as Workspaces from "./Workspaces.ts"

/**
 * Validated schema names (re-exported from `@resilience/schema` for the API).
 *
 * @since 0.1.0
 */
export { SchemaName } from "@resilience/schema"
