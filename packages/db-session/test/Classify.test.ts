/** The classification table, row by row, with errors shaped as each driver, pooler and the OS report them. */
import { assert, describe, it } from "@effect/vitest"
import pg from "pg"
import postgres from "postgres"
import { Classify, DatabaseMisconfigured, DatabaseUnavailable, QueryFailed } from "../src/index.ts"

/** A server ErrorResponse as `pg` reports it. */
const pgError = (code: string, message: string) => Object.assign(new pg.DatabaseError(message, 0, "error"), { code })
/** A server ErrorResponse as postgres.js reports it. */
const postgresError = (code: string, message: string) =>
  new postgres.PostgresError({ code, message, severity: "FATAL" } as unknown as string)
/** A system or driver error with a code and no SQLSTATE. */
const systemError = (code: string, message: string) => Object.assign(new Error(message), { code })

type Expected =
  | "Saturated"
  | "ConnectTimeout"
  | "Unreachable"
  | "NotAcceptingConnections"
  | "Misconfigured"
  | "QueryFailed"

const outcome = (error: DatabaseUnavailable | DatabaseMisconfigured | QueryFailed): Expected =>
  error._tag === "DatabaseUnavailable"
    ? error.reason
    : error._tag === "DatabaseMisconfigured"
    ? "Misconfigured"
    : "QueryFailed"

const checkout: ReadonlyArray<readonly [string, unknown, Expected]> = [
  ["PostgreSQL 53300 too many clients (pg)", pgError("53300", "sorry, too many clients already"), "Saturated"],
  [
    "PostgreSQL 53300 too many clients (postgres.js)",
    postgresError("53300", "sorry, too many clients already"),
    "Saturated"
  ],
  [
    "PostgreSQL 53300 reserved slots",
    pgError("53300", "remaining connection slots are reserved for roles with the SUPERUSER attribute"),
    "Saturated"
  ],
  ["PgBouncer max_client_conn", pgError("08P01", "no more connections allowed (max_client_conn)"), "Saturated"],
  ["PgBouncer query_wait_timeout", postgresError("08P01", "query_wait_timeout"), "Saturated"],
  ["Supavisor EMAXCONN", pgError("XX000", "(EMAXCONN) max client connections reached, limit: 3"), "Saturated"],
  [
    "Supavisor EMAXCONNSESSION",
    postgresError("XX000", "(EMAXCONNSESSION) max client connections reached in session mode, limit: 15"),
    "Saturated"
  ],
  [
    "Supavisor session mode pool full",
    pgError(
      "XX000",
      "MaxClientsInSessionMode: max clients reached - in Session mode max clients are limited to pool_size"
    ),
    "Saturated"
  ],
  ["in-process pool exhausted", systemError("POOL_EXHAUSTED", "no free connection"), "Saturated"],
  ["pg-pool wait timeout", new Error("timeout exceeded when trying to connect"), "Saturated"],
  ["57P03 starting up", pgError("57P03", "the database system is starting up"), "NotAcceptingConnections"],
  ["57P03 shutting down", postgresError("57P03", "the database system is shutting down"), "NotAcceptingConnections"],
  [
    "57P01 admin shutdown",
    pgError("57P01", "terminating connection due to administrator command"),
    "NotAcceptingConnections"
  ],
  [
    "postgres.js CONNECT_TIMEOUT",
    systemError("CONNECT_TIMEOUT", "write CONNECT_TIMEOUT 127.0.0.1:5432"),
    "ConnectTimeout"
  ],
  ["pg connectionTimeoutMillis", new Error("timeout expired"), "ConnectTimeout"],
  [
    "pg-pool connection timeout",
    new Error("Connection terminated due to connection timeout", {
      cause: new Error("Connection terminated unexpectedly")
    }),
    "ConnectTimeout"
  ],
  ["TCP ETIMEDOUT", systemError("ETIMEDOUT", "connect ETIMEDOUT 10.0.0.1:5432"), "ConnectTimeout"],
  ["ECONNREFUSED", systemError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1"), "Unreachable"],
  ["EHOSTUNREACH", systemError("EHOSTUNREACH", "connect EHOSTUNREACH 10.0.0.1:5432"), "Unreachable"],
  ["ENOTFOUND", systemError("ENOTFOUND", "getaddrinfo ENOTFOUND db.invalid"), "Unreachable"],
  ["ECONNRESET during startup", systemError("ECONNRESET", "read ECONNRESET"), "Unreachable"],
  [
    "AggregateError from a dual-stack connect",
    new AggregateError(
      [systemError("ECONNREFUSED", "connect ECONNREFUSED ::1:1"), systemError("ECONNREFUSED", "x")],
      ""
    ),
    "Unreachable"
  ],
  ["pg closed during startup", new Error("Connection terminated unexpectedly"), "Unreachable"],
  [
    "postgres.js closed during startup",
    systemError("CONNECTION_CLOSED", "write CONNECTION_CLOSED 127.0.0.1:5432"),
    "Unreachable"
  ],
  ["PgBouncer cannot reach its server", pgError("08P01", "pgbouncer cannot connect to server"), "Unreachable"],
  ["08006 connection failure", pgError("08006", "connection failure"), "Unreachable"],
  ["28P01 bad password", pgError("28P01", "password authentication failed for user \"app\""), "Misconfigured"],
  ["28000 no pg_hba entry", postgresError("28000", "no pg_hba.conf entry for host"), "Misconfigured"],
  ["3D000 unknown database", pgError("3D000", "database \"nope\" does not exist"), "Misconfigured"],
  ["42501 no CONNECT privilege", pgError("42501", "permission denied for database \"app\""), "Misconfigured"],
  ["PgBouncer unknown database", pgError("08P01", "no such database: nope"), "Misconfigured"],
  [
    "pg SASL without a password",
    new Error("SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string"),
    "Misconfigured"
  ],
  ["an unknown SQLSTATE at connect", pgError("0A000", "feature not supported"), "Misconfigured"],
  ["an unknown error without a SQLSTATE", new Error("something odd"), "Unreachable"]
]

const statement: ReadonlyArray<readonly [string, unknown, Expected]> = [
  ["23505 unique violation", pgError("23505", "duplicate key value violates unique constraint"), "QueryFailed"],
  ["42601 syntax error", postgresError("42601", "syntax error at or near \"selec\""), "QueryFailed"],
  ["42501 permission denied on a table", pgError("42501", "permission denied for table t"), "QueryFailed"],
  ["57014 statement timeout", pgError("57014", "canceling statement due to statement timeout"), "QueryFailed"],
  ["3D000 is an ordinary error mid-session", pgError("3D000", "database does not exist"), "QueryFailed"],
  [
    "57P01 terminated backend",
    pgError("57P01", "terminating connection due to administrator command"),
    "NotAcceptingConnections"
  ],
  ["ECONNRESET mid-query", systemError("ECONNRESET", "read ECONNRESET"), "Unreachable"],
  ["pg connection lost", new Error("Connection terminated unexpectedly"), "Unreachable"],
  [
    "pg client already broken",
    new Error("Client has encountered a connection error and is not queryable"),
    "Unreachable"
  ],
  [
    "postgres.js connection lost",
    systemError("CONNECTION_CLOSED", "write CONNECTION_CLOSED 127.0.0.1:5432"),
    "Unreachable"
  ],
  ["PgBouncer query_wait_timeout", pgError("08P01", "query_wait_timeout"), "Saturated"]
]

describe("Classify", () => {
  describe("checkout failures", () => {
    for (const [name, error, expected] of checkout) {
      it(name, () => {
        const classified = Classify.checkoutFailure(error, 12.5)
        assert.strictEqual(outcome(classified), expected)
        assert.strictEqual(classified.elapsedMillis, 12.5)
        assert.strictEqual(classified.message, Classify.describe(error).message)
        assert.strictEqual(classified.code, Classify.describe(error).code)
      })
    }
  })

  describe("statement failures", () => {
    for (const [name, error, expected] of statement) {
      it(name, () => {
        const classified = Classify.queryFailure(error, 3)
        assert.strictEqual(outcome(classified), expected)
        assert.strictEqual(classified.code, Classify.describe(error).code)
      })
    }
  })

  it("reads the code of the first member of an AggregateError", () => {
    const described = Classify.describe(
      new AggregateError([new Error("no code"), systemError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1")], "")
    )
    assert.strictEqual(described.code, "ECONNREFUSED")
    assert.strictEqual(described.message, "connect ECONNREFUSED 127.0.0.1:1")
  })

  it("carries SQLSTATE, message and elapsed time into the typed error", () => {
    const error = Classify.checkoutFailure(pgError("53300", "sorry, too many clients already"), 4)
    assert.instanceOf(error, DatabaseUnavailable)
    assert.deepInclude(error, {
      reason: "Saturated",
      code: "53300",
      message: "sorry, too many clients already",
      elapsedMillis: 4
    })
    const misconfigured = Classify.checkoutFailure(pgError("28P01", "password authentication failed"), 1)
    assert.instanceOf(misconfigured, DatabaseMisconfigured)
    assert.instanceOf(Classify.queryFailure(pgError("23505", "dup"), 1), QueryFailed)
  })
})
