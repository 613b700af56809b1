/**
 * `@resilience/api-client`: the API's typed client, which does on the client side what the API's 503 asks for.
 *
 * @since 0.1.0
 */

/**
 * The client: `make(options)`, one method per endpoint.
 *
 * @since 0.1.0
 */
export * as ApiClient from "./ApiClient.ts"

/**
 * `ApiUnavailable`, `ApiRejected`, `ApiUnauthorized`.
 *
 * @since 0.1.0
 */
export * as ClientErrors from "./ClientErrors.ts"

/**
 * The client's metrics.
 *
 * @since 0.1.0
 */
export * as ClientMetrics from "./ClientMetrics.ts"

/**
 * The current call, as the transport sees it.
 *
 * @since 0.1.0
 */
export * as CurrentCall from "./CurrentCall.ts"

/**
 * The retry budget (token bucket).
 *
 * @since 0.1.0
 */
export * as RetryBudget from "./RetryBudget.ts"

/**
 * The retry decisions (delay, Retry-After, safety).
 *
 * @since 0.1.0
 */
export * as RetryPolicy from "./RetryPolicy.ts"

/**
 * The retrying `HttpClient` under the typed client.
 *
 * @since 0.1.0
 */
export * as Transport from "./Transport.ts"
