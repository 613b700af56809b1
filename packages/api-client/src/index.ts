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
 * @deprecated since 0.3.0: internal (`src/internal/ClientMetrics.ts`); nothing outside this package reads these
 * values, they reach a dashboard through the application's exporter (their names are in the README); removed
 * from the index in the next minor release.
 * @since 0.1.0
 */
export * as ClientMetrics from "./internal/ClientMetrics.ts"

/**
 * The current call, as the transport sees it.
 *
 * @deprecated since 0.3.0: internal (`src/internal/CurrentCall.ts`), how `ApiClient` tells its transport which
 * call a request belongs to; removed from the index in the next minor release.
 * @since 0.1.0
 */
export * as CurrentCall from "./internal/CurrentCall.ts"

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
 * @deprecated since 0.3.0: internal (`src/internal/Transport.ts`), what `ApiClient.make` builds its client on;
 * removed from the index in the next minor release.
 * @since 0.1.0
 */
export * as Transport from "./internal/Transport.ts"
