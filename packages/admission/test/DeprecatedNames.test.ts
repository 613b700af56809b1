import { assert, describe, it } from "@effect/vitest"
import * as Admission from "../src/index.ts"

describe("deprecated names (kept for one release)", () => {
  it("Readiness is ReadinessProbe under its old name, module and service", () => {
    assert.strictEqual(Admission.Readiness, Admission.ReadinessProbe)
    assert.strictEqual(Admission.Readiness.Readiness, Admission.ReadinessProbe.ReadinessProbe)
  })
})
