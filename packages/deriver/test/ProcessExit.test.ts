import { assert, describe, it } from "@effect/vitest"
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
