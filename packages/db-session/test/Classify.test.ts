/** The classification table, row by row, with errors shaped as each driver, pooler and the OS report them. */
import { assert, describe, it } from "@effect/vitest"
import pg from "pg"
import postgres from "postgres"
import { Classify, ConnectGuard, DatabaseMisconfigured, DatabaseUnavailable, QueryFailed } from "../src/index.ts"

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

/** One test a row of `table`, named by the row's first cell, given the group the row is listed under. */
const eachRow = <K extends string, Row extends readonly [string, ...ReadonlyArray<unknown>]>(
  table: { readonly [G in K]?: ReadonlyArray<Row> },
  test: (group: K, row: Row) => void
) => {
  for (const [group, rows] of Object.entries<ReadonlyArray<Row> | undefined>(table)) {
    for (const row of rows ?? []) it(row[0], () => test(group as K, row))
  }
}

const checkout: { readonly [E in Expected]?: ReadonlyArray<readonly [string, unknown]> } = {
  Saturated: [
    ["PostgreSQL 53300 too many clients (pg)", pgError("53300", "sorry, too many clients already")],
    ["PostgreSQL 53300 too many clients (postgres.js)", postgresError("53300", "sorry, too many clients already")],
    [
      "PostgreSQL 53300 reserved slots",
      pgError("53300", "remaining connection slots are reserved for roles with the SUPERUSER attribute")
    ],
    ["PgBouncer max_client_conn", pgError("08P01", "no more connections allowed (max_client_conn)")],
    ["PgBouncer query_wait_timeout", postgresError("08P01", "query_wait_timeout")],
    ["Supavisor EMAXCONN", pgError("XX000", "(EMAXCONN) max client connections reached, limit: 3")],
    [
      "Supavisor EMAXCONNSESSION",
      postgresError("XX000", "(EMAXCONNSESSION) max client connections reached in session mode, limit: 15")
    ],
    [
      "Supavisor session mode pool full",
      pgError(
        "XX000",
        "MaxClientsInSessionMode: max clients reached - in Session mode max clients are limited to pool_size"
      )
    ],
    ["in-process pool exhausted", systemError("POOL_EXHAUSTED", "no free connection")],
    ["pg-pool wait timeout", new Error("timeout exceeded when trying to connect")]
  ],
  NotAcceptingConnections: [
    ["57P03 starting up", pgError("57P03", "the database system is starting up")],
    ["57P03 shutting down", postgresError("57P03", "the database system is shutting down")],
    ["57P01 admin shutdown", pgError("57P01", "terminating connection due to administrator command")]
  ],
  ConnectTimeout: [
    ["postgres.js CONNECT_TIMEOUT", systemError("CONNECT_TIMEOUT", "write CONNECT_TIMEOUT 127.0.0.1:5432")],
    ["pg connectionTimeoutMillis", new Error("timeout expired")],
    [
      "pg-pool connection timeout",
      new Error("Connection terminated due to connection timeout", {
        cause: new Error("Connection terminated unexpectedly")
      })
    ],
    ["TCP ETIMEDOUT", systemError("ETIMEDOUT", "connect ETIMEDOUT 10.0.0.1:5432")]
  ],
  Unreachable: [
    ["ECONNREFUSED", systemError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:1")],
    ["EHOSTUNREACH", systemError("EHOSTUNREACH", "connect EHOSTUNREACH 10.0.0.1:5432")],
    ["ENOTFOUND", systemError("ENOTFOUND", "getaddrinfo ENOTFOUND db.invalid")],
    ["ECONNRESET during startup", systemError("ECONNRESET", "read ECONNRESET")],
    [
      "AggregateError from a dual-stack connect",
      new AggregateError(
        [systemError("ECONNREFUSED", "connect ECONNREFUSED ::1:1"), systemError("ECONNREFUSED", "x")],
        ""
      )
    ],
    ["pg closed during startup", new Error("Connection terminated unexpectedly")],
    ["postgres.js closed during startup", systemError("CONNECTION_CLOSED", "write CONNECTION_CLOSED 127.0.0.1:5432")],
    ["PgBouncer cannot reach its server", pgError("08P01", "pgbouncer cannot connect to server")],
    ["08006 connection failure", pgError("08006", "connection failure")],
    ["an unknown error without a SQLSTATE", new Error("something odd")]
  ],
  Misconfigured: [
    ["28P01 bad password", pgError("28P01", "password authentication failed for user \"app\"")],
    ["28000 no pg_hba entry", postgresError("28000", "no pg_hba.conf entry for host")],
    ["3D000 unknown database", pgError("3D000", "database \"nope\" does not exist")],
    ["42501 no CONNECT privilege", pgError("42501", "permission denied for database \"app\"")],
    ["PgBouncer unknown database", pgError("08P01", "no such database: nope")],
    ["pg SASL without a password", new Error("SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string")],
    ["an unknown SQLSTATE at connect", pgError("0A000", "feature not supported")]
  ]
}

const statement: { readonly [E in Expected]?: ReadonlyArray<readonly [string, unknown]> } = {
  QueryFailed: [
    ["23505 unique violation", pgError("23505", "duplicate key value violates unique constraint")],
    ["42601 syntax error", postgresError("42601", "syntax error at or near \"selec\"")],
    ["42501 permission denied on a table", pgError("42501", "permission denied for table t")],
    ["57014 statement timeout", pgError("57014", "canceling statement due to statement timeout")],
    ["3D000 is an ordinary error mid-session", pgError("3D000", "database does not exist")]
  ],
  NotAcceptingConnections: [
    ["57P01 terminated backend", pgError("57P01", "terminating connection due to administrator command")]
  ],
  Unreachable: [
    ["ECONNRESET mid-query", systemError("ECONNRESET", "read ECONNRESET")],
    ["pg connection lost", new Error("Connection terminated unexpectedly")],
    ["pg client already broken", new Error("Client has encountered a connection error and is not queryable")],
    ["postgres.js connection lost", systemError("CONNECTION_CLOSED", "write CONNECTION_CLOSED 127.0.0.1:5432")]
  ],
  Saturated: [
    ["PgBouncer query_wait_timeout", pgError("08P01", "query_wait_timeout")]
  ]
}

/** Statement failures through `queryFailure`, then the guards, by what each one means: its name. */
const meanings: { readonly [M in Classify.Meaning]: ReadonlyArray<readonly [string, unknown, string]> } = {
  transient: [
    [
      "25006 read-only after a failover",
      pgError("25006", "cannot execute INSERT in a read-only transaction"),
      "ReadOnly"
    ],
    ["40001 serialization failure", postgresError("40001", "could not serialize access"), "SerializationFailure"],
    ["40P01 deadlock", pgError("40P01", "deadlock detected"), "Deadlock"],
    ["55P03 lock not available", pgError("55P03", "canceling statement due to lock timeout"), "LockTimeout"],
    ["57014 statement timeout", pgError("57014", "canceling statement due to statement timeout"), "StatementTimeout"],
    ["53100 disk full", pgError("53100", "could not extend file: No space left on device"), "ResourceExhausted"],
    ["53200 out of memory", postgresError("53200", "out of memory"), "ResourceExhausted"],
    ["53400 configuration limit", pgError("53400", "too many range table entries"), "ResourceExhausted"],
    ["XX000 internal error", pgError("XX000", "cache lookup failed for relation 16384"), "ServerInterrupted"]
  ],
  unavailable: [
    [
      "57P01 mid-statement",
      pgError("57P01", "terminating connection due to administrator command"),
      "NotAcceptingConnections"
    ],
    [
      "57P02 mid-statement",
      pgError("57P02", "terminating connection because of crash of another server process"),
      "NotAcceptingConnections"
    ],
    [
      "57P03 mid-statement",
      postgresError("57P03", "the database system is in recovery mode"),
      "NotAcceptingConnections"
    ],
    ["08006 mid-statement", pgError("08006", "connection failure"), "Unreachable"],
    [
      "Supavisor EDBHANDLEREXITED",
      pgError("XX000", "(EDBHANDLEREXITED) connection to database closed. Check logs for more information"),
      "Unreachable"
    ],
    [
      "Supavisor ECHECKOUTTIMEOUT",
      pgError("XX000", "(ECHECKOUTTIMEOUT) Pool checkout timeout. Request was dropped after 5000ms"),
      "Saturated"
    ],
    ["PgBouncer query_timeout", pgError("08P01", "query timeout"), "Unreachable"]
  ],
  misconfigured: [
    ["42P01 undefined table (not migrated)", pgError("42P01", "relation \"t.queue\" does not exist"), "Misconfigured"],
    ["42501 permission denied", pgError("42501", "permission denied for table t"), "Misconfigured"]
  ],
  permanent: [
    ["23505 unique violation", pgError("23505", "duplicate key value violates unique constraint"), "Permanent"],
    ["22P05 untranslatable character", pgError("22P05", "unsupported Unicode escape sequence"), "Permanent"],
    ["42601 syntax error", postgresError("42601", "syntax error at or near \"selec\""), "Permanent"],
    ["40002 deferred constraint at commit", pgError("40002", "integrity constraint violation"), "Permanent"],
    ["a driver error without a code", new Error("Cannot serialize value"), "Permanent"]
  ]
}

describe("Classify", () => {
  describe("what a statement failure means", () => {
    eachRow(meanings, (meaning, [, error, conditionName]) => {
      const classified = Classify.queryFailure(error, 1)
      assert.deepStrictEqual(Classify.conditionOf(classified), { meaning, name: conditionName })
      assert.strictEqual(Classify.isDbError(classified), true)
      assert.strictEqual(Classify.isTemporary(classified), meaning === "unavailable" || meaning === "transient")
      assert.strictEqual(Classify.isDatabaseCondition(classified), meaning !== "permanent")
      assert.strictEqual(Classify.isPermanent(classified), meaning === "permanent")
    })
  })

  it("transient conditions at checkout are the server not accepting sessions now", () => {
    const error = Classify.checkoutFailure(pgError("53200", "out of memory"), 2)
    assert.instanceOf(error, DatabaseUnavailable)
    assert.strictEqual(error._tag === "DatabaseUnavailable" && error.reason, "NotAcceptingConnections")
    assert.instanceOf(
      Classify.checkoutFailure(pgError("22023", "invalid value for parameter"), 2),
      DatabaseMisconfigured
    )
  })

  it("the guards know only db-session errors, by tag", () => {
    assert.isUndefined(Classify.conditionOf(new Error("boom")))
    assert.isUndefined(Classify.conditionOf({ _tag: "Other" }))
    assert.strictEqual(Classify.isDbError({ _tag: "QueryFailed", code: "40001", message: "x" }), true)
    assert.strictEqual(Classify.isTransient({ _tag: "QueryFailed", code: "40001", message: "x" }), true)
    assert.strictEqual(
      Classify.isMisconfigured(new DatabaseMisconfigured({ code: "28P01", message: "x", elapsedMillis: 1 })),
      true
    )
    assert.strictEqual(
      Classify.isUnavailable(
        new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "x", elapsedMillis: 1 })
      ),
      true
    )
  })

  it("isPoolExhausted: only the in-process pool's own wait (POOL_EXHAUSTED), not the database's refusals", () => {
    const exhausted = Classify.checkoutFailure(
      Object.assign(new Error("no free connection in the in-process pool (size 1) within 1000 ms"), {
        code: "POOL_EXHAUSTED"
      }),
      1000
    )
    assert.instanceOf(exhausted, DatabaseUnavailable)
    assert.isTrue(Classify.isUnavailable(exhausted), "still unavailable to the caller (503, back off)")
    assert.isTrue(Classify.isPoolExhausted(exhausted))
    assert.isFalse(
      Classify.isPoolExhausted(
        new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "x", elapsedMillis: 1 })
      )
    )
    assert.isFalse(Classify.isPoolExhausted({ code: "POOL_EXHAUSTED", message: "not a db-session error" }))
  })

  it("isAttemptHeld: only a connection attempt its guard held back (ATTEMPT_HELD)", () => {
    const held = new DatabaseUnavailable({
      reason: "Saturated",
      code: ConnectGuard.heldCode,
      message: "no connection attempt",
      elapsedMillis: 0
    })
    assert.isTrue(Classify.isAttemptHeld(held))
    assert.isTrue(Classify.isUnavailable(held), "still unavailable to the caller")
    assert.isFalse(
      Classify.isAttemptHeld(
        new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "x", elapsedMillis: 1 })
      )
    )
    assert.isFalse(Classify.isAttemptHeld({ code: ConnectGuard.heldCode, message: "not a db-session error" }))
  })

  it("every row of the table names its source and matches something", () => {
    for (const row of Classify.table) {
      assert.isAbove(row.source.length, 10)
      assert.isAbove((row.codes?.length ?? 0) + (row.classes?.length ?? 0) + (row.messages?.length ?? 0), 0)
      if (row.meaning === "unavailable") {
        assert.include(["Saturated", "ConnectTimeout", "Unreachable", "NotAcceptingConnections"], row.name)
      }
    }
  })

  describe("checkout failures", () => {
    eachRow(checkout, (expected, [, error]) => {
      const classified = Classify.checkoutFailure(error, 12.5)
      assert.strictEqual(outcome(classified), expected)
      assert.strictEqual(classified.elapsedMillis, 12.5)
      assert.strictEqual(classified.message, Classify.codeAndMessage(error).message)
      assert.strictEqual(classified.code, Classify.codeAndMessage(error).code)
    })
  })

  describe("statement failures", () => {
    eachRow(statement, (expected, [, error]) => {
      const classified = Classify.queryFailure(error, 3)
      assert.strictEqual(outcome(classified), expected)
      assert.strictEqual(classified.code, Classify.codeAndMessage(error).code)
    })
  })

  it("reads the code of the first member of an AggregateError", () => {
    const described = Classify.codeAndMessage(
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

describe("Classify.isCancelled", () => {
  it("statement timeout, transaction timeout and the client-side deadline are cancellations; others are not", () => {
    assert.isTrue(
      Classify.isCancelled(new QueryFailed({ code: "57014", message: "canceling statement due to statement timeout" }))
    )
    assert.isTrue(
      Classify.isCancelled(
        new QueryFailed({ code: "25P04", message: "terminating connection due to transaction timeout" })
      )
    )
    assert.isTrue(Classify.isCancelled(pgError("25P04", "terminating connection due to transaction timeout")))
    assert.isTrue(Classify.isCancelled({ code: "STATEMENT_TIMEOUT", message: "deadline" }))
    assert.isFalse(Classify.isCancelled(new QueryFailed({ code: "40001", message: "could not serialize" })))
    assert.isFalse(Classify.isCancelled(new Error("no code")))
  })
})

describe("Classify.noticeFailure", () => {
  // The notice as PostgreSQL 18 sends it (pg's `notice` event and postgres.js's `onnotice` carry these fields).
  const syncRep = {
    severity: "WARNING",
    code: "01000",
    message: "canceling wait for synchronous replication due to user request",
    detail: "The transaction has already committed locally, but might not have been replicated to the standby.",
    file: "syncrep.c",
    routine: "SyncRepWaitForLSN"
  }

  it("a cancelled wait for the synchronous standby is a failure: ReplicationUnconfirmed, transient", () => {
    const failure = Classify.noticeFailure(syncRep)
    assert.deepStrictEqual(failure, { code: "01000", message: `${syncRep.message}: ${syncRep.detail}` })
    const error = new QueryFailed({ code: failure?.code, message: failure?.message ?? "" })
    assert.deepStrictEqual(Classify.conditionOf(error), { meaning: "transient", name: "ReplicationUnconfirmed" })
    assert.isTrue(Classify.isTemporary(error))
    assert.isFalse(Classify.isCancelled(error))
  })

  it("any other notice is not: a warning of one's own, a transaction already in progress, a NOTICE", () => {
    assert.isUndefined(Classify.noticeFailure({ severity: "WARNING", code: "01000", message: "watch out" }))
    assert.isUndefined(
      Classify.noticeFailure({
        severity: "WARNING",
        code: "25001",
        message: "there is already a transaction in progress"
      })
    )
    assert.isUndefined(
      Classify.noticeFailure({ severity: "NOTICE", code: "00000", message: "relation exists, skipping" })
    )
    // An error row's words arriving as a notice do not fail the statement: only rows marked `notice` do.
    assert.isUndefined(Classify.noticeFailure({ severity: "WARNING", code: "57014", message: "canceling statement" }))
  })
})
