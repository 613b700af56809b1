import { describe, expect, it } from "@effect/vitest"
import { WakeContract } from "@resilience/wake"
import { Result } from "effect"

const detail = (result: Result.Result<unknown, WakeContract.InvalidWake>) =>
  Result.isFailure(result) ? result.failure.detail : "decoded"

describe("WakeContract", () => {
  it("decodes a body naming a schema and encodes it back", () => {
    const decoded = WakeContract.decodeText(WakeContract.encode({ schema: "tenant_42" }))
    expect(decoded).toEqual(Result.succeed({ schema: "tenant_42" }))
  })

  it("names the field and what is allowed when the schema is not a schema name", () => {
    expect(detail(WakeContract.decode({ schema: "Robert'); DROP" }))).toMatch(/^Invalid wake: schema: .*a-z, 0-9/)
    expect(detail(WakeContract.decode({ schema: 7 }))).toMatch(/^Invalid wake: schema: /)
    expect(detail(WakeContract.decode({}))).toMatch(/^Invalid wake: schema: /)
    expect(detail(WakeContract.decode({ schema: "pg_catalog" }))).toMatch(/^Invalid wake: schema: /)
  })

  it("says the body is not JSON", () => {
    expect(detail(WakeContract.decodeText("{"))).toBe("Invalid wake: body: expected JSON {\"schema\": string}")
    expect(detail(WakeContract.decode(null))).toMatch(/^Invalid wake: body: /)
  })
})
