import { assert, describe, it } from "@effect/vitest"
import * as Schema from "../src/index.ts"

// the shape's old name is the same type both ways (checked by the typecheck, which reads test/)
const asGate = (readiness: Schema.SchemaMigration.Readiness): Schema.SchemaGate.Gate => readiness
const asReadiness = (gate: Schema.SchemaGate.Gate): Schema.SchemaMigration.Readiness => gate
void asGate
void asReadiness

describe("deprecated names (kept for one release)", () => {
  it("SchemaGate is SchemaMigration under its old name: the module and the service", () => {
    assert.strictEqual(Schema.SchemaGate, Schema.SchemaMigration)
    assert.strictEqual(Schema.SchemaGate.SchemaGate, Schema.SchemaMigration.SchemaMigration)
  })
})
