/**
 * The API app: its definition (for typed clients and docs), its implementation and its settings.
 *
 * @since 0.1.0
 */

/**
 * The API definition: import it to derive a typed client (`HttpApiClient.make(Api.Api, …)`).
 *
 * @since 0.1.0
 */
export * as Api from "./Api.ts"

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
