/**
 * Maps failures to HTTP: an unavailable database or a transient failure to a fast 503 with `Retry-After`, everything else to an
 * opaque 500.
 *
 * @since 0.1.0
 */

/**
 * The `Retry-After` policy: fixed seconds or a range drawn per response.
 *
 * @since 0.1.0
 */
export * as RetryAfter from "./RetryAfter.ts"

/**
 * Framework-neutral: a failure in, `{ status, headers, body }` out.
 *
 * @since 0.1.0
 */
export * as ErrorResponse from "./ErrorResponse.ts"

/**
 * Effect HTTP: the mapping on a cause, as a combinator on an app, and as global `HttpRouter` middleware.
 *
 * @since 0.1.0
 */
export * as HttpErrors from "./HttpErrors.ts"

/**
 * Effect `HttpApi` middleware that declares and answers the 503 and the 500.
 *
 * @since 0.1.0
 */
export * as ApiMiddleware from "./ApiMiddleware.ts"

/**
 * `HttpApi` middleware that answers request validation failures with a 400 naming the field.
 *
 * @since 0.1.0
 */
export * as Validation from "./Validation.ts"

/**
 * A request body limit answered with a 413 that says so.
 *
 * @since 0.1.0
 */
export * as RequestLimits from "./RequestLimits.ts"
