import { assert, describe, it } from "@effect/vitest"
import { Model, Names } from "@resilience/model"
import { Schema } from "effect"

describe("Names", () => {
  it("accepts safe identifiers and refuses the rest", () => {
    const ok = Schema.is(Names.WorkspaceName)
    assert.isTrue(ok("acme-1_x"))
    for (const bad of ["", "-acme", "a b", "a/b", "a".repeat(65), "ws;drop"]) assert.isFalse(ok(bad), bad)
    assert.isTrue(Schema.is(Names.SessionName)("s:1.a"))
    assert.isFalse(Schema.is(Names.PeerName)("a".repeat(129)))
  })
})

describe("Model", () => {
  it("refuses a message that PostgreSQL text cannot hold or that is too long", () => {
    const ok = Schema.is(Model.NewMessage)
    assert.isTrue(ok({ peer: "alice", content: "hello" }))
    assert.isFalse(ok({ peer: "alice", content: "a\u0000b" }))
    assert.isFalse(ok({ peer: "alice", content: "x".repeat(Model.maxContentLength + 1) }))
    assert.isFalse(ok({ peer: "alice", content: "" }))
  })
})
