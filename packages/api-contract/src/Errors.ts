/**
 * The API's own errors. Every error body is `{"detail": "…"}`; the database errors (503, 500) and the
 * validation error (400) come from `@resilience/api-errors`.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/** The body of every error: `{"detail": "…"}`. */
const ErrorBody = { detail: Schema.String }

/**
 * 401: no bearer token.
 *
 * @since 0.1.0
 * @category errors
 */
export class Unauthorized extends Schema.Error<Unauthorized>("@resilience/api-app/Unauthorized")(ErrorBody, {
  httpApiStatus: 401,
  description: "No bearer token was given."
}) {}

/**
 * 403: a bearer token that does not grant this request (another workspace's token, a wrong admin token).
 *
 * @since 0.1.0
 * @category errors
 */
export class Forbidden extends Schema.Error<Forbidden>("@resilience/api-app/Forbidden")(ErrorBody, {
  httpApiStatus: 403,
  description: "The bearer token does not grant access to this resource."
}) {}

/**
 * 404: no such workspace, or nothing derived yet for this peer.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotFound extends Schema.Error<NotFound>("@resilience/api-app/NotFound")(ErrorBody, {
  httpApiStatus: 404,
  description: "The workspace (or the peer's representation) does not exist."
}) {}

/**
 * 409: a workspace with this name exists already.
 *
 * @since 0.1.0
 * @category errors
 */
export class Conflict extends Schema.Error<Conflict>("@resilience/api-app/Conflict")(ErrorBody, {
  httpApiStatus: 409,
  description: "A workspace with this name exists already."
}) {}

/**
 * 422: this `Idempotency-Key` already names a different request (another body or session) within the
 * retention window.
 *
 * @since 0.1.0
 * @category errors
 */
export class IdempotencyKeyReused
  extends Schema.Error<IdempotencyKeyReused>("@resilience/api-app/IdempotencyKeyReused")(ErrorBody, {
    httpApiStatus: 422,
    description: "The Idempotency-Key was used for a different request within the retention window; use a new key."
  })
{}
