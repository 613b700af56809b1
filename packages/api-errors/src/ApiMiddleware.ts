/**
 * The mapping as `HttpApi` middleware. Declare it on an API (`HttpApi.make(…).add(…).middleware(ApiMiddleware.DatabaseErrors)`)
 * and the OpenAPI document and generated clients know the 503 and the 500; provide {@link layer} or
 * {@link layerConfig} to the server.
 *
 * The middleware is needed in addition to router-level middleware: `HttpApi` turns a failure that an endpoint
 * did not declare into an encoding defect before router middleware sees it, so the database errors have to be
 * caught inside the API.
 *
 * @since 0.1.0
 */
import { Effect, Layer, Schema } from "effect"
import type * as Config from "effect/Config"
import { HttpApiMiddleware } from "effect/http-api"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as HttpErrors from "./HttpErrors.ts"
import * as RetryAfter from "./RetryAfter.ts"

/**
 * The 503 body, `{"detail":"database temporarily unavailable"}`; the response also carries `Retry-After`.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatabaseTemporarilyUnavailable extends Schema.Error<DatabaseTemporarilyUnavailable>(
  "@resilience/api-errors/DatabaseTemporarilyUnavailable"
)({
  detail: Schema.Literal(ErrorResponse.unavailableDetail)
}, {
  httpApiStatus: 503,
  description: "The database is saturated or unreachable. Retry after the number of seconds in Retry-After."
}) {}

/**
 * The opaque 500 body, `{"detail":"An unexpected error occurred"}`.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnexpectedError extends Schema.Error<UnexpectedError>("@resilience/api-errors/UnexpectedError")({
  detail: Schema.Literal(ErrorResponse.unexpectedDetail)
}, {
  httpApiStatus: 500,
  description: "An unexpected failure; details are in the server's log, not in the response."
}) {}

/**
 * `HttpApi` middleware that answers `@resilience/db-session` errors (503 with `Retry-After` for what its table
 * calls unavailable or transient, opaque 500 otherwise) and unanswerable defects (opaque 500). The endpoints' declared
 * errors pass through to their encoders.
 *
 * @since 0.1.0
 * @category middleware
 */
export class DatabaseErrors extends HttpApiMiddleware.Service<DatabaseErrors>()(
  "@resilience/api-errors/DatabaseErrors",
  { error: [DatabaseTemporarilyUnavailable, UnexpectedError] }
) {}

/**
 * The server side of {@link DatabaseErrors}, with a `Retry-After` policy (default: 1 second).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options?: { readonly retryAfter?: RetryAfter.RetryAfter | undefined }): Layer.Layer<
  DatabaseErrors
> => {
  const handle = HttpErrors.handle({ retryAfter: options?.retryAfter, answers: "database" })
  return Layer.succeed(DatabaseErrors, (httpEffect) => handle(httpEffect))
}

/**
 * {@link layer} with the `Retry-After` policy read from the environment variables `names` gives
 * ({@link RetryAfter.config}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (names: RetryAfter.Names): Layer.Layer<DatabaseErrors, Config.ConfigError> =>
  Layer.unwrap(
    Effect.gen(function*() {
      const retryAfter = yield* RetryAfter.config(names)
      return layer({ retryAfter })
    })
  )
