/**
 * The map's verdict on per-second series, the same rule for the lab and the simulator: saturated (clients at
 * the limit, or a refusal) in 90 % of the seconds after the trigger is "collapsed", in one of the last seconds
 * but less often "relapses"; otherwise recovered when the last saturated second after the trigger ended.
 */
import { assert, describe, it } from "@effect/vitest"
import * as LabMap from "../src/Map.ts"

/** A 60 s series saturated in the given seconds. */
const series = (saturatedSeconds: ReadonlyArray<number>) =>
  Array.from({ length: 60 }, (_, s) => saturatedSeconds.includes(s))

const none = new Float64Array(60)

describe("the map's verdict", () => {
  it("recovers: seconds from the trigger's end to the end of the last saturated second", () => {
    const verdict = LabMap.judge(series([20, 21, 30, 31, 32]), none, Float64Array.from({ length: 60 }, () => 2), 25)
    assert.strictEqual(verdict.outcome, "recovers")
    // seconds 30..32 after an end at 25: back for good from second 33, 8 s after
    assert.strictEqual(verdict.recoverySeconds, 8)
    assert.strictEqual(verdict.saturatedAfter, 3)
    assert.strictEqual(verdict.goodputAfter, 2)
  })

  it("recovers at once when nothing is saturated after the trigger", () => {
    assert.strictEqual(LabMap.judge(series([10, 24]), none, none, 25).recoverySeconds, 0)
  })

  it("collapsed: saturated in 90 % of the seconds after the trigger; relapses: a burst at the end", () => {
    const after = Array.from({ length: 35 }, (_, i) => 25 + i)
    const collapsed = LabMap.judge(series(after.filter((s) => s % 12 !== 0)), none, none, 25)
    assert.strictEqual(collapsed.outcome, "collapsed")
    assert.isNull(collapsed.recoverySeconds)
    assert.strictEqual(LabMap.verdictText(collapsed), "collapsed")
    // a few saturated seconds at the end (the herd coming back) is not a collapse
    const burst = LabMap.judge(series([60 - LabMap.tail]), none, none, 25)
    assert.strictEqual(burst.outcome, "relapses")
    assert.strictEqual(LabMap.verdictText(burst), "relapses (1 s)")
    assert.strictEqual(LabMap.judge(series([60 - LabMap.tail - 1]), none, none, 25).outcome, "recovers")
    // judged again from what a verdict recorded, the same
    assert.deepStrictEqual(LabMap.rejudge({ ...burst, outcome: "collapsed" }, 35), burst)
    assert.deepStrictEqual(LabMap.rejudge(collapsed, 35), collapsed)
  })

  it("counts refusals after the trigger's end only", () => {
    const refusals = Float64Array.from({ length: 60 }, (_, s) => s === 10 || s === 30 ? 5 : 0)
    assert.strictEqual(LabMap.judge(series([]), refusals, none, 25).refusalsAfter, 5)
  })
})
