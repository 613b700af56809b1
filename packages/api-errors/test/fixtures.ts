/**
 * The real `@resilience/db-session` errors, built the way a failed checkout builds them.
 */
import { DatabaseMisconfigured, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"

export const saturated = new DatabaseUnavailable({
  reason: "Saturated",
  code: "53300",
  message: "sorry, too many clients already",
  elapsedMillis: 3
})

export const connectTimeout = new DatabaseUnavailable({
  reason: "ConnectTimeout",
  code: "CONNECT_TIMEOUT",
  message: "timeout expired",
  elapsedMillis: 2000
})

export const badPassword = new DatabaseMisconfigured({
  code: "28P01",
  message: "password authentication failed for user \"secret_user\"",
  elapsedMillis: 4
})

export const syntaxError = new QueryFailed({ code: "42601", message: "syntax error at or near \"SELEC\"" })

/** A write on a primary that a failover demoted: transient, a 503. */
export const readOnly = new QueryFailed({
  code: "25006",
  message: "cannot execute INSERT in a read-only transaction"
})
