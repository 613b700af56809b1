/**
 * The typed failures of a checkout or a statement: unavailable (try again later), misconfigured (no later
 * attempt can help), or a statement that the server rejected on a live connection.
 *
 * @since 0.1.0
 */
import { Schema } from "effect"

/**
 * Why the database is unavailable right now; in every case "try again later" is the right answer.
 *
 * @since 0.1.0
 * @category schemas
 */
export const UnavailableReason = Schema.Literals([
  "Saturated",
  "ConnectTimeout",
  "Unreachable",
  "NotAcceptingConnections"
])

/**
 * Why the database is unavailable right now.
 *
 * @since 0.1.0
 * @category models
 */
export type UnavailableReason = typeof UnavailableReason.Type

/**
 * The database cannot serve this checkout now: the server or its pooler is full (`Saturated`), the single
 * attempt ran out of time (`ConnectTimeout`), nothing answered (`Unreachable`), or the server refuses sessions
 * while it starts, stops or recovers (`NotAcceptingConnections`). API → 503; deriver → back off.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatabaseUnavailable extends Schema.TaggedError<DatabaseUnavailable>()("DatabaseUnavailable", {
  reason: UnavailableReason,
  /** SQLSTATE (`53300`), system code (`ECONNREFUSED`) or driver code (`CONNECT_TIMEOUT`), when there is one. */
  code: Schema.UndefinedOr(Schema.String),
  /** The server's (or the driver's) own message. */
  message: Schema.String,
  /** Time from the start of the checkout to the failure. */
  elapsedMillis: Schema.Number
}) {}

/**
 * The database rejected this configuration (bad password, unknown database or role, no permission to
 * connect): no later attempt can succeed until someone changes a setting. API → 500; deriver → log loudly.
 *
 * @since 0.1.0
 * @category errors
 */
export class DatabaseMisconfigured extends Schema.TaggedError<DatabaseMisconfigured>()("DatabaseMisconfigured", {
  code: Schema.UndefinedOr(Schema.String),
  message: Schema.String,
  elapsedMillis: Schema.Number
}) {}

/**
 * A statement failed on a live connection (constraint violation, syntax error, …); `code` is its SQLSTATE.
 *
 * @since 0.1.0
 * @category errors
 */
export class QueryFailed extends Schema.TaggedError<QueryFailed>()("QueryFailed", {
  code: Schema.UndefinedOr(Schema.String),
  message: Schema.String
}) {}

/**
 * Every failure that a checkout or a statement can produce.
 *
 * @since 0.1.0
 * @category models
 */
export type DbError = DatabaseUnavailable | DatabaseMisconfigured | QueryFailed

/**
 * A failure of the checkout itself (before the caller's code runs).
 *
 * @since 0.1.0
 * @category models
 */
export type CheckoutError = DatabaseUnavailable | DatabaseMisconfigured
