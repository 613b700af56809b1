import { assert, describe, it } from "@effect/vitest"
import { DatabaseMisconfigured, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import { Cause, Exit } from "effect"
import * as Outcome from "../src/Outcome.ts"
import { Shed } from "../src/Shed.ts"

const unavailable = new DatabaseUnavailable({
  reason: "Saturated",
  code: "53300",
  message: "too many",
  elapsedMillis: 2
})
const poolExhausted = new DatabaseUnavailable({
  reason: "Saturated",
  code: "POOL_EXHAUSTED",
  message: "no free connection in the in-process pool (size 1) within 1000 ms",
  elapsedMillis: 1000
})
const failed = (code: string) => new QueryFailed({ code, message: `failed with ${code}` })

describe("Outcome", () => {
  it("reads db-session's table: unavailable, overload, answers, and what teaches nothing", () => {
    const cases: ReadonlyArray<[Exit.Exit<unknown, unknown>, Outcome.Outcome]> = [
      [Exit.succeed(1), "Answered"],
      [Exit.fail(unavailable), "Unavailable"],
      [Exit.fail(poolExhausted), "Exhausted"],
      [Exit.failCause(Cause.combine(Cause.fail(poolExhausted), Cause.die(unavailable))), "Unavailable"],
      [Exit.die(unavailable), "Unavailable"],
      [Exit.fail(failed("57014")), "Overloaded"],
      [Exit.fail(failed("53200")), "Overloaded"],
      [Exit.fail(failed("25006")), "Answered"],
      [Exit.fail(failed("40P01")), "Answered"],
      [Exit.fail(failed("23505")), "Answered"],
      [Exit.fail("a handler's own error"), "Answered"],
      [Exit.fail(new DatabaseMisconfigured({ code: "28P01", message: "password", elapsedMillis: 1 })), "Ignored"],
      [Exit.fail(new Shed({ reason: "QueueTimeout" })), "Ignored"],
      [Exit.interrupt(1), "Ignored"],
      [Exit.failCause(Cause.combine(Cause.fail(failed("23505")), Cause.die(unavailable))), "Unavailable"]
    ]
    for (const [exit, expected] of cases) assert.strictEqual(Outcome.ofExit(exit), expected, String(exit))
  })

  it("what the circuit hears: only unavailable counts against the database; local overload tells it nothing", () => {
    assert.strictEqual(Outcome.toBreaker("Unavailable"), "Unavailable")
    assert.strictEqual(Outcome.toBreaker("Overloaded"), "Answered")
    assert.strictEqual(Outcome.toBreaker("Answered"), "Answered")
    assert.strictEqual(Outcome.toBreaker("Exhausted"), "Ignored")
    assert.strictEqual(Outcome.toBreaker("Ignored"), "Ignored")
  })
})
