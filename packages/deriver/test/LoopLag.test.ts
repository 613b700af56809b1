/**
 * The lag probe: its arithmetic (pure, on numbers as a clock) and, live, that a real stall of the event loop
 * (a busy wait on the process's own thread) is counted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as LoopLag from "../src/LoopLag.ts"

const settings: LoopLag.Settings = { intervalMillis: 50, toleranceMillis: 2 }

describe("LoopLag", () => {
  it("counts each tick's lateness past the tolerance, and a stall in progress before its tick fires", () => {
    let state = LoopLag.initial(settings, 0)
    state = LoopLag.tick(settings, state, 51) // 1 ms late: within the tolerance
    assert.strictEqual(state.stalledMillis, 0)
    assert.strictEqual(state.dueAtMillis, 101)
    state = LoopLag.tick(settings, state, 401) // 300 ms late
    assert.strictEqual(state.stalledMillis, 298)
    // due at 451; at 1451 the tick has not fired yet: the 998 ms past it already count
    assert.strictEqual(LoopLag.stalledAt(settings, state, 1451), 298 + 998)
    // and the tick that then fires counts the same, so reads never go back
    const fired = LoopLag.tick(settings, state, 1451)
    assert.strictEqual(fired.stalledMillis, LoopLag.stalledAt(settings, state, 1451))
    assert.strictEqual(LoopLag.stalledAt(settings, fired, 1460), fired.stalledMillis)
  })

  it.live("a real busy wait of 300 ms on the event loop is counted as lag", () =>
    Effect.scoped(Effect.gen(function*() {
      const probe = yield* LoopLag.make()
      yield* Effect.sleep(120)
      const before = yield* probe.stalledMillis
      const until = performance.now() + 300
      while (performance.now() < until) {
        // hold the thread: no timer can fire
      }
      const after = yield* probe.stalledMillis
      assert.isAtLeast(after - before, 300 - settings.intervalMillis - settings.toleranceMillis)
    })))
})
