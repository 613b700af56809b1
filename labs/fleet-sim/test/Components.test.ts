import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Chart from "../src/Chart.ts"
import { EventQueue } from "../src/EventQueue.ts"
import * as Model from "../src/Model.ts"
import * as Options from "../src/Options.ts"
import * as Prng from "../src/Prng.ts"
import * as RetryBackoff from "../src/RetryBackoff.ts"

describe("EventQueue", () => {
  it("pops in time order, and in insertion order among equal times", () => {
    const queue = new EventQueue(2)
    const random = Prng.make("heap")
    const pushed: Array<[number, number]> = []
    for (let k = 0; k < 2000; k++) {
      const time = Math.floor(random() * 50)
      queue.push(time, 0, k, 0)
      pushed.push([time, k])
    }
    const expected = [...pushed].sort((a, b) => a[0] - b[0] || a[1] - b[1]).map(([, k]) => k)
    const popped: Array<number> = []
    while (queue.pop()) popped.push(queue.poppedSubject)
    assert.deepStrictEqual(popped, expected)
  })
})

describe("Prng", () => {
  it("is seeded: same seed, same draws; draws are uniform in [0, 1)", () => {
    const a = Prng.make("x")
    const b = Prng.make("x")
    const buckets = Array.from({ length: 10 }, () => 0)
    for (let k = 0; k < 100_000; k++) {
      const u = a()
      assert.strictEqual(u, b())
      assert.isTrue(u >= 0 && u < 1)
      buckets[Math.floor(u * 10)]!++
    }
    for (const count of buckets) assert.isTrue(Math.abs(count - 10_000) < 500, `bucket ${count}`)
    assert.notStrictEqual(Prng.make("y")(), Prng.make("x")())
  })
})

describe("RetryBackoff (the removed retry, simulator only)", () => {
  const settings = RetryBackoff.reference
  it("waits initial · 2^(k−1) + U(0, 1 s), capped at 2 s", () => {
    assert.strictEqual(RetryBackoff.waitFrom(settings, 1, 0), 100)
    assert.strictEqual(RetryBackoff.waitFrom(settings, 2, 0), 200)
    assert.strictEqual(RetryBackoff.waitFrom(settings, 3, 0.5), 900)
    assert.strictEqual(RetryBackoff.waitFrom(settings, 5, 0.5), 2000)
    assert.strictEqual(RetryBackoff.waitFrom(settings, 30, 0), 2000)
  })
  it("gives up once a failed attempt finds the 10 s budget spent", () => {
    assert.isFalse(RetryBackoff.exhausted(settings, 9_999))
    assert.isTrue(RetryBackoff.exhausted(settings, 10_000))
  })
})

describe("Model and Options", () => {
  it("the policies set jitter, startup jitter and acquisition as the spec describes", () => {
    const poll = Model.incident.poll
    assert.deepStrictEqual(Model.policy("baseline", poll).acquisition, { kind: "retry", retry: RetryBackoff.reference })
    assert.strictEqual(Model.policy("baseline", poll).poll.ratio, 0)
    assert.strictEqual(Model.policy("fixed", poll).poll.ratio, 0.5)
    assert.strictEqual(Model.policy("fixed", poll).startupJitterMillis, 30_000)
    assert.deepStrictEqual(Model.policy("failfast-only", poll).acquisition, {
      kind: "failfast",
      connectTimeoutMillis: 2_000
    })
    assert.strictEqual(Model.policy("jitter-only", poll).acquisition.kind, "retry")
  })

  it.effect("overrides apply, and an out-of-range value names its flag", () =>
    Effect.gen(function*() {
      const preset = Model.preset("incident", "baseline")
      const params = yield* Options.apply(preset, new Map([["derivers", 100], ["retry-budget", 5], ["cores", 8]]))
      assert.strictEqual(params.derivers, 100)
      assert.strictEqual(params.database.cores, 8)
      assert.deepStrictEqual(params.acquisition, {
        kind: "retry",
        retry: { ...RetryBackoff.reference, budgetMillis: 5_000 }
      })
      // the preset itself is untouched
      assert.strictEqual(preset.derivers, 11_543)
      const error = yield* Effect.flip(Options.apply(preset, new Map([["jitter-ratio", 1.5]])))
      assert.strictEqual(error.parameter, "--jitter-ratio")
      const notInt = yield* Effect.flip(Options.apply(preset, new Map([["derivers", 2.5]])))
      assert.strictEqual(notInt.parameter, "--derivers")
      // the poll settings go through @resilience/jitter's own validation
      const badMax = yield* Effect.flip(Options.apply(preset, new Map([["max-interval", 0.5]])))
      assert.strictEqual(badMax.parameter, "--max")
    }))
})

describe("Chart", () => {
  it.effect("renders an SVG with a line per series and the ceiling rule, without a browser", () =>
    Effect.gen(function*() {
      const svg = yield* Chart.timeSeries("t", [
        {
          title: "active",
          lines: [{ name: "a", values: [1, 5, 3] }, { name: "b", values: [2, 2, 2] }],
          rule: { label: "ceiling 4", value: 4 }
        }
      ])
      assert.isTrue(svg.startsWith("<svg"))
      assert.include(svg, "ceiling 4")
      assert.include(svg, "mark-line role-mark")
    }))
})
