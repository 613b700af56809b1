import { assert, describe, it } from "@effect/vitest"
import { ErrorResponse, RetryAfter } from "@resilience/api-errors"
import { Cause } from "effect"
import { badPassword, connectTimeout, readOnly, saturated, syntaxError } from "./fixtures.ts"

const unavailableBody = { detail: "database temporarily unavailable" }
const unexpectedBody = { detail: "An unexpected error occurred" }

describe("ErrorResponse.fromFailure", () => {
  it("DatabaseUnavailable (every reason) is a 503 with Retry-After and the fixed body", () => {
    for (const error of [saturated, connectTimeout]) {
      const response = ErrorResponse.fromFailure(error)
      assert.strictEqual(response.status, 503)
      assert.strictEqual(response.headers["retry-after"], "1")
      assert.strictEqual(response.headers["content-type"], "application/json")
      assert.deepStrictEqual(response.body, unavailableBody)
      assert.strictEqual(ErrorResponse.bodyText(response), "{\"detail\":\"database temporarily unavailable\"}")
    }
  })

  it("Retry-After: integer seconds, a fixed policy, or a range with a caller's random source", () => {
    assert.strictEqual(ErrorResponse.fromFailure(saturated, { retryAfter: 4 }).headers["retry-after"], "4")
    assert.strictEqual(
      ErrorResponse.fromFailure(saturated, { retryAfter: RetryAfter.fixed(2) }).headers["retry-after"],
      "2"
    )
    const range = { minSeconds: 1, maxSeconds: 10 }
    assert.strictEqual(ErrorResponse.fromFailure(saturated, { retryAfter: range }).headers["retry-after"], "1")
    assert.strictEqual(
      ErrorResponse.fromFailure(saturated, { retryAfter: range, random: () => 0.999 }).headers["retry-after"],
      "10"
    )
    assert.strictEqual(
      ErrorResponse.fromFailure(saturated, { retryAfter: range, random: () => 0.5 }).headers["retry-after"],
      "6"
    )
  })

  it("DatabaseMisconfigured, a failed statement, and anything unknown are the opaque 500", () => {
    for (const failure of [badPassword, syntaxError, new Error("boom at /srv/app.ts:12"), "a string", null, 42]) {
      const response = ErrorResponse.fromFailure(failure)
      assert.strictEqual(response.status, 500)
      assert.deepStrictEqual(response.body, unexpectedBody)
      assert.isUndefined(response.headers["retry-after"])
      const text = ErrorResponse.bodyText(response)
      assert.notInclude(text, "password")
      assert.notInclude(text, "secret_user")
      assert.notInclude(text, "boom")
    }
  })

  it("an Effect Cause: DatabaseUnavailable anywhere (failure or defect) is a 503", () => {
    assert.strictEqual(ErrorResponse.fromFailure(Cause.fail(saturated)).status, 503)
    assert.strictEqual(ErrorResponse.fromFailure(Cause.die(connectTimeout)).status, 503)
    assert.strictEqual(
      ErrorResponse.fromFailure(Cause.combine(Cause.die(new Error("x")), Cause.fail(saturated))).status,
      503
    )
    assert.strictEqual(ErrorResponse.fromFailure(Cause.fail(badPassword)).status, 500)
    assert.strictEqual(ErrorResponse.fromFailure(Cause.die("boom")).status, 500)
  })

  it("a request the admission gate shed (matched by tag) is the same 503, its reason the kind", () => {
    const shed = { _tag: "AdmissionShed", reason: "CircuitOpen" }
    const response = ErrorResponse.fromFailure(shed)
    assert.strictEqual(response.status, 503)
    assert.strictEqual(response.headers["retry-after"], "1")
    assert.deepStrictEqual(response.body, unavailableBody)
    assert.strictEqual(ErrorResponse.fromFailure(Cause.die(shed)).status, 503)
    assert.deepStrictEqual(ErrorResponse.classify(Cause.fail(shed)), { kind: "Unavailable", reason: "CircuitOpen" })
    assert.isTrue(ErrorResponse.isDbError(shed))
    assert.isFalse(ErrorResponse.isShed({ _tag: "DatabaseUnavailable", reason: "Saturated" }))
  })

  it("classify tells the three kinds apart", () => {
    assert.deepStrictEqual(ErrorResponse.classify(saturated), { kind: "Unavailable", reason: "Saturated" })
    assert.deepStrictEqual(ErrorResponse.classify(Cause.fail(connectTimeout)), {
      kind: "Unavailable",
      reason: "ConnectTimeout"
    })
    assert.deepStrictEqual(ErrorResponse.classify(badPassword), { kind: "Misconfigured" })
    assert.deepStrictEqual(ErrorResponse.classify(Cause.fail(badPassword)), { kind: "Misconfigured" })
    assert.deepStrictEqual(ErrorResponse.classify(syntaxError), { kind: "Unexpected" })
    assert.deepStrictEqual(ErrorResponse.classify(undefined), { kind: "Unexpected" })
  })

  it("a transient statement failure (read-only after a failover) is a 503, whatever else is in the cause", () => {
    assert.deepStrictEqual(ErrorResponse.classify(readOnly), { kind: "Transient", reason: "ReadOnly" })
    assert.strictEqual(ErrorResponse.fromFailure(readOnly).status, 503)
    assert.strictEqual(ErrorResponse.fromFailure(Cause.die(readOnly)).headers["retry-after"], "1")
    assert.deepStrictEqual(
      ErrorResponse.classify(Cause.combine(Cause.fail(badPassword), Cause.die(readOnly))),
      { kind: "Transient", reason: "ReadOnly" }
    )
    assert.strictEqual(ErrorResponse.fromFailure(syntaxError).status, 500)
  })
})
