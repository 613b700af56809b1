import { assert, describe, it } from "@effect/vitest"
import { Stats } from "../src/index.ts"

const oneTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1)

describe("Stats.quantile", () => {
  it("is the nearest rank: the ⌈q·n⌉-th smallest, a measured value", () => {
    const hundred = oneTo(100).toReversed()
    assert.strictEqual(Stats.quantile(hundred, 0.99), 99)
    assert.strictEqual(Stats.quantile(hundred, 0.5), 50)
    assert.strictEqual(Stats.quantile(hundred, 0.07), 7)
    assert.strictEqual(Stats.quantile(hundred, 0.991), 100)
    assert.strictEqual(Stats.quantile(hundred, 0), 1)
    assert.strictEqual(Stats.quantile(hundred, 1), 100)
    assert.strictEqual(Stats.quantile([3, 1, 2], 0.5), 2)
    assert.strictEqual(Stats.quantile([0.5, 10], 0.75), 10)
  })

  it("is NaN over no values and leaves the values in their order", () => {
    assert.isNaN(Stats.quantile([], 0.5))
    const values = [3, 1, 2]
    Stats.quantile(values, 0.5)
    assert.deepStrictEqual(values, [3, 1, 2])
  })
})

describe("Stats.median, mean, max, fixed", () => {
  it("takes the lower middle value of an even count", () => {
    assert.strictEqual(Stats.median([4, 1, 3, 2]), 2)
    assert.strictEqual(Stats.median([5, 1, 3]), 3)
  })

  it("gives NaN over no values, which fixed prints as -", () => {
    assert.strictEqual(Stats.mean([1, 2, 6]), 3)
    assert.strictEqual(Stats.max([1, 7, 3]), 7)
    assert.isNaN(Stats.mean([]))
    assert.isNaN(Stats.max([]))
    assert.strictEqual(Stats.fixed(Stats.median([])), "-")
    assert.strictEqual(Stats.fixed(1 / 0), "-")
    assert.strictEqual(Stats.fixed(undefined), "-")
    assert.strictEqual(Stats.fixed(2.345, 2), "2.35")
  })
})
