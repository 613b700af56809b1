/**
 * The API app: the implementation of `@resilience/api-contract` and its settings.
 *
 * @since 0.1.0
 */

/**
 * The handlers and the server layer.
 *
 * @since 0.1.0
 */
export * as Http from "./Http.ts"

/**
 * The schema's readiness (background migrations while the database does not answer).
 *
 * @since 0.1.0
 */
export * as SchemaReady from "./SchemaReady.ts"

/**
 * Settings from the environment.
 *
 * @since 0.1.0
 */
export * as Settings from "./Settings.ts"
