import { assert, describe, it } from "@effect/vitest"
import * as Deriver from "../src/index.ts"

describe("deprecated names (kept for one release)", () => {
  it("SchemaReadiness is SchemaGate under its old name, module and interface", () => {
    assert.strictEqual(Deriver.SchemaReadiness, Deriver.SchemaGate)
    const start: (options: Deriver.SchemaGate.Options) => unknown = Deriver.SchemaReadiness.start
    assert.strictEqual(start, Deriver.SchemaGate.start)
    const sameType = (gate: Deriver.SchemaGate.SchemaGate): Deriver.SchemaReadiness.SchemaReadiness => gate
    assert.isFunction(sameType)
  })
})
