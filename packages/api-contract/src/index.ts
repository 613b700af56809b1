/**
 * `@resilience/api-contract`: the HTTP API's definition, importable by clients without server code.
 *
 * @since 0.1.0
 */

/**
 * The `HttpApi`: groups, endpoints, request bodies.
 *
 * @since 0.1.0
 */
export * as Api from "./Api.ts"

/**
 * The API's own errors (401, 403, 404, 409).
 *
 * @since 0.1.0
 */
export * as Errors from "./Errors.ts"

/**
 * The bearer-token middlewares.
 *
 * @since 0.1.0
 */
export * as Security from "./Security.ts"
