import { assert, describe, it } from "@effect/vitest"
import * as Schema from "../src/index.ts"

describe("deprecated names (kept for one release)", () => {
  it("SchemaGate is SchemaMigration under its old name: module, service and shape", () => {
    assert.strictEqual(Schema.SchemaGate, Schema.SchemaMigration)
    assert.strictEqual(Schema.SchemaGate.SchemaGate, Schema.SchemaMigration.SchemaMigration)
    // the shape's old name is the same type (checked by the compiler)
    const asGate = (migration: Schema.SchemaMigration.Readiness): Schema.SchemaGate.Gate => migration
    assert.isFunction(asGate)
  })
})
