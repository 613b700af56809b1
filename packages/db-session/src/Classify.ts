/**
 * What a database failure means: the one table of this repository that turns what a driver, a pooler, the
 * server or the operating system reported into one of four meanings, and the guards every other package uses
 * to ask about a failure (the deriver's outcome policy, the API's 503s). Pure and table-driven, so the same
 * rules apply to `pg`, postgres.js and the in-process pool, and can be unit-tested without a server.
 *
 * - `unavailable`: the database (or its pooler) cannot serve anyone right now; come back later.
 * - `transient`: this statement or unit of work failed for a reason that goes away by itself (serialization
 *   failure, deadlock, lock or statement timeout, read-only after a failover, resource exhaustion); run the
 *   unit of work again later, nothing is wrong with it.
 * - `permanent`: the request or the data is wrong; the same statement fails again.
 * - `misconfigured`: the deployment is wrong (credentials, database, schema, permissions); someone has to
 *   change a setting.
 *
 * @since 0.2.0
 */
import { Predicate } from "effect"
import {
  type CheckoutError,
  DatabaseMisconfigured,
  DatabaseUnavailable,
  QueryFailed,
  UnavailableReason
} from "./Errors.ts"

/**
 * The four meanings of a database failure.
 *
 * @since 0.2.0
 * @category models
 */
export type Meaning = "unavailable" | "transient" | "permanent" | "misconfigured"

/**
 * The code and message that the classifier reads from any thrown value.
 *
 * @since 0.1.0
 * @category models
 */
export interface Described {
  readonly code: string | undefined
  readonly message: string
}

/**
 * The short names of {@link table}'s rows: for `unavailable` rows, the `DatabaseUnavailable` reason. A caller
 * that picks rows by name (admission's `Outcome`) names them through this type, so a renamed row is a type
 * error there.
 *
 * @since 0.2.0
 * @category models
 */
export type RowName =
  | UnavailableReason
  | "Misconfigured"
  | "Tls"
  | "ReadOnly"
  | "SerializationFailure"
  | "Deadlock"
  | "LockTimeout"
  | "StatementTimeout"
  | "ResourceExhausted"
  | "ServerInterrupted"
  | "ReplicationUnconfirmed"

/**
 * One row of the table: which codes, SQLSTATE classes and message fragments mean what, a short `name` for
 * metrics and logs (for `unavailable` rows, the `DatabaseUnavailable` reason) and where they come from.
 *
 * @since 0.2.0
 * @category models
 */
export interface Row {
  readonly meaning: Meaning
  readonly name: RowName
  /** SQLSTATEs, Node system codes or driver codes. */
  readonly codes?: ReadonlyArray<string>
  /** SQLSTATE classes: the first two characters. */
  readonly classes?: ReadonlyArray<string>
  /** Message fragments, for poolers and drivers that report a condition without a code of their own. */
  readonly messages?: ReadonlyArray<RegExp>
  /** Whether a failure of this row means the work was cancelled by a timeout or a cancel request. */
  readonly cancelled?: boolean
  /**
   * Whether the condition arrives as a notice (a `WARNING`) on a statement that otherwise succeeded: the
   * session fails the statement with it ({@link noticeFailure}), so that no caller reads the success as an
   * answer.
   */
  readonly notice?: boolean
  /** Where the codes and messages are documented. */
  readonly source: string
}

const pgAppendix = "PostgreSQL, Appendix A (Error Codes)"
const pgBouncer = "PgBouncer 1.18 error messages (sent as 08P01)"
const supavisor = "Supavisor lib/supavisor/errors/*.ex (sent as XX000, message \"(CODE) …\")"

/**
 * The table, first match wins: within a row a code, a class or a message matches. Message rows come before
 * the generic codes they are sent with (PgBouncer's 08P01, Supavisor's XX000).
 *
 * XX000 (`internal_error`) that is not a pooler's message is `transient`: PostgreSQL raises it for conditions
 * that "cannot happen" (a cache lookup failing under concurrent DDL, a lost file handle), which neither the
 * request nor the deployment caused and which usually pass; recording it against an item would lose work that
 * succeeds later, and the caller backs off rather than spins.
 *
 * @since 0.2.0
 * @category constants
 */
export const table: ReadonlyArray<Row> = [
  // --- unavailable: come back later -------------------------------------------------------------------------
  { meaning: "unavailable", name: "Saturated", codes: ["53300"], source: `${pgAppendix}: 53300 too_many_connections` },
  {
    meaning: "unavailable",
    name: "Saturated",
    messages: [/no more connections allowed/i, /query_wait_timeout/i],
    source: `${pgBouncer}: max_client_conn reached, query_wait_timeout`
  },
  {
    meaning: "unavailable",
    name: "Saturated",
    messages: [
      /^\(EMAXCONN(SESSION)?\)/,
      /max client(s| connections) reached/i,
      /MaxClientsInSessionMode/,
      /^\(ECHECKOUTTIMEOUT\)/,
      /Pool checkout timeout/i,
      /^\(ECIRCUITBREAKER\)/
    ],
    source: `${supavisor}: EMAXCONN, EMAXCONNSESSION, ECHECKOUTTIMEOUT, ECIRCUITBREAKER`
  },
  {
    meaning: "unavailable",
    name: "Saturated",
    codes: ["POOL_EXHAUSTED"],
    messages: [/timeout exceeded when trying to connect/i],
    source: "db-session in-process pool (POOL_EXHAUSTED), pg-pool: no free slot within the connect timeout"
  },
  {
    meaning: "unavailable",
    name: "NotAcceptingConnections",
    codes: ["57P01", "57P02", "57P03"],
    source: `${pgAppendix}: 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now`
  },
  {
    meaning: "unavailable",
    name: "NotAcceptingConnections",
    messages: [/database ".*" is disabled/, /server login has been failing/i],
    source: `${pgBouncer}: database disabled (DISABLE), server login failing`
  },
  {
    meaning: "unavailable",
    name: "ConnectTimeout",
    codes: ["CONNECT_TIMEOUT", "ETIMEDOUT"],
    messages: [/^timeout expired$/, /connection timeout/i, /client_login_timeout/i],
    source:
      "postgres.js CONNECT_TIMEOUT, pg \"timeout expired\", pg-pool, TCP ETIMEDOUT; PgBouncer client_login_timeout"
  },
  {
    meaning: "unavailable",
    name: "Unreachable",
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
    messages: [/^Connection terminated/, /not queryable/i],
    source: "Node system errors; postgres.js CONNECTION_*; pg \"Connection terminated…\", \"…not queryable\""
  },
  {
    meaning: "unavailable",
    name: "Unreachable",
    messages: [
      /cannot connect to server/i,
      /server conn crashed/i,
      /^query timeout$/,
      /^idle transaction timeout$/,
      /^client_idle_timeout$/
    ],
    source:
      `${pgBouncer}: cannot connect to server, server conn crashed?, query_timeout, idle_transaction_timeout, client_idle_timeout (the connection is closed)`
  },
  {
    meaning: "unavailable",
    name: "Unreachable",
    messages: [/^\(EDBHANDLEREXITED\)/, /^\(EPOOLTERMINATING\)/],
    source: `${supavisor}: EDBHANDLEREXITED, EPOOLTERMINATING`
  },
  {
    meaning: "unavailable",
    name: "Unreachable",
    codes: ["25P03", "57P05"],
    source:
      `${pgAppendix}: 25P03 idle_in_transaction_session_timeout, 57P05 idle_session_timeout (the server closed the session)`
  },
  // --- misconfigured: fix the deployment (message rows before the generic classes below) ------------------
  {
    meaning: "misconfigured",
    name: "Tls",
    codes: [
      "DEPTH_ZERO_SELF_SIGNED_CERT",
      "SELF_SIGNED_CERT_IN_CHAIN",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      "UNABLE_TO_GET_ISSUER_CERT",
      "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
      "UNABLE_TO_DECRYPT_CERT_SIGNATURE",
      "UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY",
      "CERT_SIGNATURE_FAILURE",
      "CERT_NOT_YET_VALID",
      "CERT_HAS_EXPIRED",
      "ERROR_IN_CERT_NOT_BEFORE_FIELD",
      "ERROR_IN_CERT_NOT_AFTER_FIELD",
      "CERT_CHAIN_TOO_LONG",
      "CERT_REVOKED",
      "INVALID_CA",
      "PATH_LENGTH_EXCEEDED",
      "INVALID_PURPOSE",
      "CERT_UNTRUSTED",
      "CERT_REJECTED",
      "HOSTNAME_MISMATCH",
      "ERR_TLS_CERT_ALTNAME_INVALID",
      "ERR_TLS_CERT_ALTNAME_FORMAT"
    ],
    source:
      "Node.js TLS: X509 certificate error codes (doc/api/tls.md, from OpenSSL's X509_V_ERR_*), ERR_TLS_CERT_ALTNAME_INVALID / _FORMAT (doc/api/errors.md): the server's certificate is not trusted or does not name the host"
  },
  {
    meaning: "misconfigured",
    name: "Tls",
    messages: [
      /The server does not support SSL connections/,
      /There was an error establishing an SSL connection/,
      /^SSL required$/,
      /SSL routines/,
      /^no pg_hba\.conf entry for .*, no encryption$/
    ],
    source:
      `pg lib/connection.js (the server answered "N" or an error to the SSLRequest), db-session's postgres.js driver (the same words for "N"); ${pgBouncer}: SSL required (client_tls_sslmode); OpenSSL handshake errors ("error:…:SSL routines::…", Node codes ERR_SSL_*); PostgreSQL src/backend/libpq/auth.c: no pg_hba.conf entry …, no encryption (only hostssl lines match)`
  },
  {
    meaning: "misconfigured",
    name: "Misconfigured",
    messages: [
      /no such (database|user)/i,
      /unsupported startup parameter/i,
      /^SSL required$/,
      /^\(ENOTFOUND\)/,
      /tenant\/user .* not found/i,
      /Tenant or user not found/i,
      /^SASL: /,
      /password authentication failed/i,
      /does not support SSL/i
    ],
    source:
      `${pgBouncer}: no such database/user, unsupported startup parameter, SSL required; ${supavisor}: ENOTFOUND; pg client SASL and SSL errors`
  },
  {
    meaning: "unavailable",
    name: "Unreachable",
    classes: ["08"],
    source: `${pgAppendix}: class 08 connection_exception`
  },
  {
    meaning: "misconfigured",
    name: "Misconfigured",
    codes: ["3D000", "3F000", "42501", "42704", "42P01", "42703", "42883", "57P04", "0A000", "XX001", "XX002"],
    classes: ["28"],
    source:
      `${pgAppendix}: class 28 invalid_authorization_specification, 3D000 invalid_catalog_name, 3F000 invalid_schema_name, 42501 insufficient_privilege, 42704 undefined_object, 42P01 undefined_table, 42703 undefined_column, 42883 undefined_function (schema not migrated or a version skew), 57P04 database_dropped, 0A000 feature_not_supported, XX001 data_corrupted, XX002 index_corrupted`
  },
  // --- transient: run the unit of work again later -----------------------------------------------------------
  {
    meaning: "transient",
    name: "ReadOnly",
    codes: ["25006"],
    source: `${pgAppendix}: 25006 read_only_sql_transaction (a standby, or a primary demoted by a failover)`
  },
  {
    meaning: "transient",
    name: "SerializationFailure",
    codes: ["40000", "40001", "40003"],
    source: `${pgAppendix}: 40000 transaction_rollback, 40001 serialization_failure, 40003 statement_completion_unknown`
  },
  { meaning: "transient", name: "Deadlock", codes: ["40P01"], source: `${pgAppendix}: 40P01 deadlock_detected` },
  {
    meaning: "transient",
    name: "LockTimeout",
    codes: ["55P03", "55006"],
    source: `${pgAppendix}: 55P03 lock_not_available, 55006 object_in_use`
  },
  {
    meaning: "transient",
    name: "StatementTimeout",
    codes: ["57014", "25P04", "STATEMENT_TIMEOUT"],
    cancelled: true,
    source:
      `${pgAppendix}: 57014 query_canceled (statement_timeout, cancel request), 25P04 transaction_timeout; db-session STATEMENT_TIMEOUT (the client-side deadline)`
  },
  {
    // The commit is done on the primary but not known to be on the standby: a failover may lose it. Not a
    // success (a 201 would be an acknowledged write a failover can lose) and not `cancelled` (the work was
    // not undone): an unknown outcome, resent under its idempotency key.
    meaning: "transient",
    name: "ReplicationUnconfirmed",
    messages: [/^canceling wait for synchronous replication due to /],
    notice: true,
    source:
      "PostgreSQL src/backend/replication/syncrep.c, SyncRepWaitForLSN: a cancel request (pg_cancel_backend, a client's CancelRequest) during the wait for a synchronous standby ends the wait with a WARNING, SQLSTATE 01000, \"canceling wait for synchronous replication due to user request\", DETAIL \"The transaction has already committed locally, but might not have been replicated to the standby.\", and the statement (COMMIT) succeeds; a shutdown during the wait (57P01) sends nothing and closes the connection (Unreachable). statement_timeout does not end the wait: the server stops its timer before committing"
  },
  {
    meaning: "transient",
    name: "ResourceExhausted",
    codes: ["53000", "53100", "53200", "53400", "58000", "58030"],
    source:
      `${pgAppendix}: 53000 insufficient_resources, 53100 disk_full, 53200 out_of_memory, 53400 configuration_limit_exceeded, 58000 system_error, 58030 io_error`
  },
  {
    meaning: "transient",
    name: "ServerInterrupted",
    codes: ["57000", "72000", "XX000"],
    source: `${pgAppendix}: 57000 operator_intervention, 72000 snapshot_too_old, XX000 internal_error (see above)`
  }
]

/**
 * Whether a code has the shape of a SQLSTATE (five digits or capital letters), as opposed to a Node system code
 * or a driver's own code.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isSqlState = (code: string | undefined): code is string => code !== undefined && /^[0-9A-Z]{5}$/.test(code)

/**
 * The first row of {@link table} that matches a code and a message, if any.
 *
 * @since 0.2.0
 * @category decisions
 */
export const lookup = (described: Described): Row | undefined => table.find((row) => matches(row, described))

const matches = (row: Row, { code, message }: Described): boolean =>
  (code !== undefined && row.codes?.includes(code) === true)
  || (isSqlState(code) && row.classes?.includes(code.slice(0, 2)) === true)
  || row.messages?.some((pattern) => pattern.test(message)) === true

/**
 * The failure a notice (a `NoticeResponse` as the driver hands it over: `pg`'s `notice` event, postgres.js's
 * `onnotice`) stands for, if it matches a row marked `notice` (the server's `WARNING` that a commit may not be
 * on the synchronous standby): its code and its message, with the server's detail after a colon. Any other
 * notice is `undefined`: informational, the statement's success stands.
 *
 * @since 0.3.0
 * @category constructors
 */
export const noticeFailure = (notice: unknown): Described | undefined => {
  const described = codeAndMessage(notice)
  if (!table.some((row) => row.notice === true && matches(row, described))) return undefined
  const detail = stringField(notice, "detail")
  return detail === undefined ? described : { code: described.code, message: `${described.message}: ${detail}` }
}

const stringField = (value: unknown, field: string): string | undefined => {
  if (!Predicate.isObject(value) || !Predicate.hasProperty(value, field)) return undefined
  const found = value[field]
  return Predicate.isString(found) && found.length > 0 ? found : undefined
}

/**
 * Reads the code and message of any thrown value. A connect to a name with several addresses fails with an
 * `AggregateError` whose members carry the codes; the first member that has one speaks for all.
 *
 * @since 0.1.0
 * @category decisions
 */
export const codeAndMessage = (error: unknown): Described => {
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

const unavailableReason = (row: Row): UnavailableReason =>
  row.meaning === "unavailable" && isUnavailableReason(row.name) ? row.name : "NotAcceptingConnections"

/**
 * Classifies a failure of a checkout (connecting, authenticating, waiting for a slot). `unavailable` and
 * `transient` rows are `DatabaseUnavailable` (a transient refusal of a session is the server not accepting it
 * now); an unrecognised refusal that carries a SQLSTATE, or a `permanent` one, is `DatabaseMisconfigured` (the
 * server said no for a reason no later attempt changes); an unrecognised failure without one is a transport
 * problem: `Unreachable`.
 *
 * @since 0.1.0
 * @category decisions
 */
export const checkoutFailure = (error: unknown, elapsedMillis: number): CheckoutError => {
  const described = codeAndMessage(error)
  const row = lookup(described)
  const fields = { code: described.code, message: described.message, elapsedMillis }
  if (row !== undefined && (row.meaning === "unavailable" || row.meaning === "transient")) {
    return new DatabaseUnavailable({ reason: unavailableReason(row), ...fields })
  }
  if (row === undefined && !isSqlState(described.code)) {
    return new DatabaseUnavailable({ reason: "Unreachable", ...fields })
  }
  return new DatabaseMisconfigured(fields)
}

/**
 * Classifies a failure of a statement on a checked-out connection. A lost connection (terminated backend,
 * reset, pooler timeout) is `DatabaseUnavailable`; everything the server rejected as a statement is
 * `QueryFailed` with its SQLSTATE, whose meaning {@link meaningOf} reads from the same table.
 *
 * @since 0.1.0
 * @category decisions
 */
export const queryFailure = (error: unknown, elapsedMillis: number): QueryFailed | DatabaseUnavailable => {
  const described = codeAndMessage(error)
  const row = lookup(described)
  return row?.meaning === "unavailable"
    ? new DatabaseUnavailable({
      reason: unavailableReason(row),
      code: described.code,
      message: described.message,
      elapsedMillis
    })
    : new QueryFailed({ code: described.code, message: described.message })
}

/**
 * What a failure means and its short name, for a db-session error; `undefined` for anything else.
 *
 * @since 0.2.0
 * @category models
 */
export interface Condition {
  readonly meaning: Meaning
  /** A row's name, `Permanent` for a statement failure the table does not know, or an unavailable reason. */
  readonly name: RowName | "Permanent" | "Unavailable"
}

const unavailableReasons: ReadonlySet<string> = new Set<UnavailableReason>(UnavailableReason.literals)

const isUnavailableReason = (reason: string | undefined): reason is UnavailableReason =>
  reason !== undefined && unavailableReasons.has(reason)

const permanent: Condition = { meaning: "permanent", name: "Permanent" }

/**
 * The {@link Condition} of a db-session error (matched by tag, so it also works across two copies of this
 * package): `DatabaseUnavailable` is `unavailable` with its reason, `DatabaseMisconfigured` is `misconfigured`,
 * and a `QueryFailed` means what its code (or message) means in {@link table}; a statement failure the table
 * does not know is `permanent`. Anything that is not a db-session error is `undefined`.
 *
 * @since 0.2.0
 * @category decisions
 */
export const conditionOf = (error: unknown): Condition | undefined => {
  if (Predicate.isTagged(error, "DatabaseUnavailable")) {
    const reason = stringField(error, "reason")
    return { meaning: "unavailable", name: isUnavailableReason(reason) ? reason : "Unavailable" }
  }
  if (Predicate.isTagged(error, "DatabaseMisconfigured")) return { meaning: "misconfigured", name: "Misconfigured" }
  if (Predicate.isTagged(error, "QueryFailed")) {
    const row = lookup({ code: stringField(error, "code"), message: stringField(error, "message") ?? "" })
    return row === undefined ? permanent : { meaning: row.meaning, name: row.name }
  }
  return undefined
}

/**
 * The {@link Meaning} of a db-session error; `undefined` for anything else.
 *
 * @since 0.2.0
 * @category decisions
 */
export const meaningOf = (error: unknown): Meaning | undefined => conditionOf(error)?.meaning

/**
 * Whether a value is one of db-session's errors (`DatabaseUnavailable`, `DatabaseMisconfigured`, `QueryFailed`).
 *
 * @since 0.2.0
 * @category predicates
 */
export const isDbError = (error: unknown): boolean => conditionOf(error) !== undefined

/**
 * Whether the database (or its pooler) cannot serve anyone right now.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isUnavailable = (error: unknown): boolean => meaningOf(error) === "unavailable"

/**
 * Whether this statement failed for a reason that passes by itself (run the unit of work again later).
 *
 * @since 0.2.0
 * @category predicates
 */
export const isTransient = (error: unknown): boolean => meaningOf(error) === "transient"

/**
 * Whether the request or the data is wrong: the same statement fails again.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isPermanent = (error: unknown): boolean => meaningOf(error) === "permanent"

/**
 * Whether the deployment is wrong (credentials, database, schema, permissions).
 *
 * @since 0.2.0
 * @category predicates
 */
export const isMisconfigured = (error: unknown): boolean => meaningOf(error) === "misconfigured"

/**
 * Whether a caller should come back later: `unavailable` or `transient` (an API answers 503).
 *
 * @since 0.2.0
 * @category predicates
 */
export const isTemporary = (error: unknown): boolean => {
  const meaning = meaningOf(error)
  return meaning === "unavailable" || meaning === "transient"
}

/**
 * Whether a failure is a condition of the database rather than of the work: `unavailable`, `transient` or
 * `misconfigured`. Work that failed this way is left pending, never recorded as failed.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isDatabaseCondition = (error: unknown): boolean => {
  const meaning = meaningOf(error)
  return meaning !== undefined && meaning !== "permanent"
}

/**
 * Whether a checkout failed waiting for a slot of this process's own in-process pool (`POOL_EXHAUSTED`): every
 * connection it may hold is in use by its own callers. That is local overload, not evidence about the database
 * (no connection attempt was made): a caller's limit may come down, but a circuit must not open on it.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isPoolExhausted = (error: unknown): boolean =>
  Predicate.isTagged(error, "DatabaseUnavailable") && stringField(error, "code") === "POOL_EXHAUSTED"

/**
 * Whether a checkout failed because its `ConnectGuard` held the connection attempt back (`ATTEMPT_HELD`): its
 * process is backing off the database and tried no connection, so, like `POOL_EXHAUSTED`, it is no new evidence
 * about the database.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isAttemptHeld = (error: unknown): boolean =>
  Predicate.isTagged(error, "DatabaseUnavailable") && stringField(error, "code") === attemptHeldCode

/**
 * The code of a connection attempt a `ConnectGuard` held back (`ConnectGuard.heldCode`); defined here, with the
 * other meanings, so that this pure module imports nothing of the session.
 *
 * @since 0.2.0
 * @category constants
 */
export const attemptHeldCode = "ATTEMPT_HELD"

/**
 * Whether a failure means its work was cancelled by a timeout or a cancel request (a {@link table} row marked
 * `cancelled`: statement timeout, transaction timeout, db-session's client-side deadline), read from a
 * db-session error or any value with a `code`.
 *
 * @since 0.2.0
 * @category predicates
 */
export const isCancelled = (error: unknown): boolean => {
  const code = stringField(error, "code")
  if (code === undefined) return false
  return lookup({ code, message: stringField(error, "message") ?? "" })?.cancelled === true
}
