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
 * Settings from the environment.
 *
 * @since 0.1.0
 */
export * as Settings from "./Settings.ts"
