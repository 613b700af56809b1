import { assert, describe, it } from "@effect/vitest"
import { DatabaseMisconfigured, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import { Cause, Exit } from "effect"
import * as ProcessExit from "../src/ProcessExit.ts"

const codeOf = (exit: Exit.Exit<unknown, unknown>): number => {
  let code = -1
  ProcessExit.teardown(exit, (c) => {
    code = c
  })
  return code
}

describe("ProcessExit.teardown", () => {
  it("a stop by signal (interruption only) is 0, a failure or a defect 1, success 0", () => {
    assert.strictEqual(codeOf(Exit.failCause(Cause.interrupt(1))), 0)
    assert.strictEqual(codeOf(Exit.fail("misconfigured")), 1)
    assert.strictEqual(codeOf(Exit.die(new Error("loop died"))), 1)
    assert.strictEqual(codeOf(Exit.void), 0)
  })
})

describe("ProcessExit.ofDatabaseError", () => {
  it("unavailable or transient → 75 (try again), misconfigured → 78, anything else → 1", () => {
    const unavailable = new DatabaseUnavailable({
      reason: "Saturated",
      code: "53300",
      message: "too many clients",
      elapsedMillis: 3
    })
    assert.strictEqual(ProcessExit.ofDatabaseError(unavailable), ProcessExit.codes.unavailable)
    assert.strictEqual(ProcessExit.codes.unavailable, 75)
    const lockTimeout = new QueryFailed({ code: "55P03", message: "lock timeout" })
    assert.strictEqual(ProcessExit.ofDatabaseError(lockTimeout), 75)
    const denied = new DatabaseMisconfigured({
      code: "28P01",
      message: "password authentication failed",
      elapsedMillis: 1
    })
    assert.strictEqual(ProcessExit.ofDatabaseError(denied), 78)
    const syntax = new QueryFailed({ code: "42601", message: "syntax error" })
    assert.strictEqual(ProcessExit.ofDatabaseError(syntax), 1)
  })
})
