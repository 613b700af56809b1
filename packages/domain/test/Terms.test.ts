import { assert, describe, it } from "@effect/vitest"
import * as Terms from "../src/Terms.ts"

describe("Terms", () => {
  it("lower-cases, splits on non-word characters and drops short and stop words", () => {
    assert.deepStrictEqual(Terms.extract("The Apples, and the BANANAS! an ox; café-crème 2024"), [
      "apples",
      "bananas",
      "café",
      "crème",
      "2024"
    ])
  })

  it("counts over many texts and ranks ties alphabetically", () => {
    const counts = Terms.count(["pear apple", "apple zebra", "pear"])
    assert.deepStrictEqual(Terms.top(counts, 2), [{ term: "apple", count: 2 }, { term: "pear", count: 2 }])
  })
})
