/**
 * Turns what a driver, a pooler or the operating system threw into one of the typed failures. Pure and
 * table-driven, so the same rules apply to `pg`, postgres.js and the in-process pool, and can be unit-tested
 * without a server.
 */
import { Predicate } from "effect"
import {
  type CheckoutError,
  DatabaseMisconfigured,
  DatabaseUnavailable,
  QueryFailed,
  type UnavailableReason
} from "./Errors.ts"

/** The code and message that the classifier reads from any thrown value. */
export interface Described {
  readonly code: string | undefined
  readonly message: string
}

/** What a failure means for the caller. */
export type Verdict =
  | { readonly _tag: "Unavailable"; readonly reason: UnavailableReason }
  | { readonly _tag: "Misconfigured" }
  | { readonly _tag: "Unknown" }

/** One row of the classification table: which codes and message fragments map to which verdict. */
export interface Rule {
  readonly verdict: Verdict
  readonly codes?: ReadonlyArray<string>
  readonly messages?: ReadonlyArray<RegExp>
  /** Where the codes and messages come from, for the README table. */
  readonly source: string
}

const unavailable = (reason: UnavailableReason): Verdict => ({ _tag: "Unavailable", reason })
const misconfigured: Verdict = { _tag: "Misconfigured" }

/**
 * The table, first match wins. Message rules exist only where a pooler or driver reports a condition without
 * a code of its own (PgBouncer and Supavisor send generic SQLSTATEs; pg's timeouts carry no code at all).
 */
export const rules: ReadonlyArray<Rule> = [
  {
    source: "PostgreSQL: too_many_connections",
    verdict: unavailable("Saturated"),
    codes: ["53300"]
  },
  {
    source: "PgBouncer: max_client_conn reached, query_wait_timeout (both 08P01)",
    verdict: unavailable("Saturated"),
    messages: [/no more connections allowed/i, /query_wait_timeout/i]
  },
  {
    source: "Supavisor: XX000 (EMAXCONN) / (EMAXCONNSESSION), session-mode pool full",
    verdict: unavailable("Saturated"),
    messages: [/^\(EMAXCONN(SESSION)?\)/, /max client(s| connections) reached/i, /MaxClientsInSessionMode/]
  },
  {
    source: "in-process pool: no free slot within the connect timeout",
    verdict: unavailable("Saturated"),
    codes: ["POOL_EXHAUSTED"],
    messages: [/timeout exceeded when trying to connect/i]
  },
  {
    source: "PostgreSQL: cannot_connect_now, admin_shutdown, crash_shutdown",
    verdict: unavailable("NotAcceptingConnections"),
    codes: ["57P03", "57P01", "57P02"]
  },
  {
    source: "connect timeout: postgres.js CONNECT_TIMEOUT, pg \"timeout expired\", pg-pool, TCP ETIMEDOUT",
    verdict: unavailable("ConnectTimeout"),
    codes: ["CONNECT_TIMEOUT", "ETIMEDOUT"],
    messages: [/^timeout expired$/, /connection timeout/i, /client_login_timeout/i]
  },
  {
    source: "network: refused, no route, unknown host, reset or closed during startup",
    verdict: unavailable("Unreachable"),
    codes: [
      "ECONNREFUSED",
      "EHOSTUNREACH",
      "ENETUNREACH",
      "ENOTFOUND",
      "EAI_AGAIN",
      "ECONNRESET",
      "ECONNABORTED",
      "EPIPE",
      "CONNECTION_CLOSED",
      "CONNECTION_ENDED",
      "CONNECTION_DESTROYED"
    ],
    messages: [
      /^Connection terminated/,
      /not queryable/i,
      /cannot connect to server/i,
      /server login has been failing/i,
      /server conn crashed/i
    ]
  },
  {
    source: "authentication and catalog: 28xxx, 3D000, 3F000, 42501, 42704; PgBouncer unknown database/user",
    verdict: misconfigured,
    codes: ["28000", "28P01", "3D000", "3F000", "42501", "42704"],
    messages: [/no such (database|user)/i, /SASL/, /password/i, /does not support SSL/i]
  },
  {
    source: "connection exception class 08 (not matched above)",
    verdict: unavailable("Unreachable"),
    codes: ["08000", "08001", "08003", "08004", "08006", "08007"]
  }
]

const stringField = (value: unknown, field: string): string | undefined => {
  if (!Predicate.isObject(value) || !Predicate.hasProperty(value, field)) return undefined
  const found = value[field]
  return Predicate.isString(found) && found.length > 0 ? found : undefined
}

/**
 * Reads the code and message of any thrown value. A connect to a name with several addresses fails with an
 * `AggregateError` whose members carry the codes; the first member that has one speaks for all.
 */
export const describe = (error: unknown): Described => {
  const ownMessage = stringField(error, "message")
  const message = ownMessage ?? (Predicate.isString(error) ? error : String(error))
  const own = stringField(error, "code")
  if (own !== undefined) return { code: own, message }
  if (error instanceof AggregateError) {
    for (const member of error.errors) {
      const code = stringField(member, "code")
      if (code !== undefined) return { code, message: ownMessage ?? stringField(member, "message") ?? message }
    }
  }
  return { code: undefined, message }
}

/** The verdict for a code and a message, by the first matching rule of {@link rules}. */
export const verdict = ({ code, message }: Described): Verdict => {
  for (const rule of rules) {
    if (code !== undefined && rule.codes?.includes(code)) return rule.verdict
    if (rule.messages?.some((pattern) => pattern.test(message))) return rule.verdict
  }
  return { _tag: "Unknown" }
}

const isSqlState = (code: string | undefined): code is string => code !== undefined && /^[0-9A-Z]{5}$/.test(code)

/**
 * Classifies a failure of a checkout (connecting, authenticating, waiting for a slot). An unrecognised
 * refusal that carries a SQLSTATE is `DatabaseMisconfigured` (the server said no for a reason no later
 * attempt changes); an unrecognised failure without one is a transport problem: `Unreachable`.
 */
export const checkoutFailure = (error: unknown, elapsedMillis: number): CheckoutError => {
  const described = describe(error)
  const found = verdict(described)
  const fields = { code: described.code, message: described.message, elapsedMillis }
  switch (found._tag) {
    case "Unavailable":
      return new DatabaseUnavailable({ reason: found.reason, ...fields })
    case "Misconfigured":
      return new DatabaseMisconfigured(fields)
    case "Unknown":
      return isSqlState(described.code)
        ? new DatabaseMisconfigured(fields)
        : new DatabaseUnavailable({ reason: "Unreachable", ...fields })
  }
}

/**
 * Classifies a failure of a statement on a checked-out connection. A lost connection (terminated backend,
 * reset, pooler timeout) is `DatabaseUnavailable`; everything the server rejected as a statement is
 * `QueryFailed` with its SQLSTATE, including permission and catalog errors, which are ordinary SQL errors here.
 */
export const queryFailure = (error: unknown, elapsedMillis: number): QueryFailed | DatabaseUnavailable => {
  const described = describe(error)
  const found = verdict(described)
  return found._tag === "Unavailable"
    ? new DatabaseUnavailable({ reason: found.reason, code: described.code, message: described.message, elapsedMillis })
    : new QueryFailed({ code: described.code, message: described.message })
}
