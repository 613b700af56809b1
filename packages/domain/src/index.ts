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
 * The domain tables' migrations.
 *
 * @since 0.1.0
 */
export * as DomainSchema from "./DomainSchema.ts"

/**
 * Storing messages (and enqueuing their derivation).
 *
 * @since 0.1.0
 */
export * as Messages from "./Messages.ts"

/**
 * The domain's values as schemas (server free; also `@resilience/domain/Model`).
 *
 * @since 0.1.0
 */
export * as Model from "./Model.ts"

/**
 * Name schemas and the work unit key.
 *
 * @since 0.1.0
 */
export * as Names from "./Names.ts"

/**
 * Queue counts per workspace.
 *
 * @since 0.1.0
 */
export * as QueueStatus from "./QueueStatus.ts"

/**
 * The `representation` task.
 *
 * @since 0.1.0
 */
export * as Representation from "./Representation.ts"

/**
 * Reading derived representations.
 *
 * @since 0.1.0
 */
export * as Representations from "./Representations.ts"

/**
 * Term counting.
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
 * Validated schema names (re-exported from `@resilience/deriver` for the API).
 *
 * @since 0.1.0
 */
export { SchemaName } from "@resilience/deriver"
