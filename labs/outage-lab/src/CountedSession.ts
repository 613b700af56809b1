/**
 * A `DbSession` that counts what passes through it: every checkout is one connection attempt, and every
 * failure is recorded by kind (`max_client_conn` refusal, connect timeout, …) and by phase (the checkout
 * itself, or a statement on a connection that the pooler could not serve, such as `query_wait_timeout`).
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import { Effect } from "effect"
import * as Counters from "./Counters.ts"

/** The kind of a database failure, as the lab reports it. */
export const kindOf = (error: DbError): string =>
  error._tag === "DatabaseUnavailable" ? error.reason : error._tag === "QueryFailed" ? "QueryFailed" : "Misconfigured"

const isDbError = (error: unknown): error is DbError =>
  typeof error === "object" && error !== null && "_tag" in error &&
  (error._tag === "DatabaseUnavailable" || error._tag === "DatabaseMisconfigured" || error._tag === "QueryFailed")

/**
 * Runs one use of the session (`use` receives the effect that marks "the connection was handed over"), and
 * counts it.
 */
const counted = <A, E, R>(
  counters: Counters.Counters,
  role: Counters.Role,
  use: (handedOver: Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    counters.attempts[role] += 1
    let connected = false
    return use(Effect.sync(() => {
      connected = true
    })).pipe(
      Effect.tapError((error) =>
        Effect.sync(() => {
          if (!isDbError(error)) return
          const kind = kindOf(error)
          Counters.bump(counters.failures, `${role}:${connected ? "query" : "checkout"}:${kind}`)
          if (!connected && kind === "Saturated") counters.refusals += 1
          if (!connected && kind === "ConnectTimeout") counters.timeouts += 1
        })
      ),
      Effect.onInterrupt(() =>
        Effect.sync(() => {
          if (connected && role === "deriver") counters.cancelled += 1
        })
      )
    )
  })

/**
 * Wraps a session. `onUse` sees each use with its "handed over" marker, so that a wrapper around this one
 * can tell a failed checkout from a failed statement.
 */
export const wrap = (
  inner: DbSession["Service"],
  counters: Counters.Counters,
  role: Counters.Role
): DbSession["Service"] =>
  DbSession.of({
    withConnection: (f) =>
      counted(counters, role, (handedOver) => inner.withConnection((c) => Effect.andThen(handedOver, f(c)))),
    transaction: (f) =>
      counted(counters, role, (handedOver) => inner.transaction((c) => Effect.andThen(handedOver, f(c)))),
    query: <Row>(sql: string, params?: ReadonlyArray<unknown>) =>
      counted(
        counters,
        role,
        (handedOver) => inner.withConnection((c) => Effect.andThen(handedOver, c.query<Row>(sql, params)))
      ),
    oneCheckout: (effect) =>
      counted(counters, role, (handedOver) => inner.oneCheckout(Effect.andThen(handedOver, effect)))
  })
