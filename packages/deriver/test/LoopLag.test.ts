/**
 * The process's own time: the drift probe's arithmetic and the schedstat parse (pure), and, live, that real
 * work on the event loop (a busy wait on the process's own thread) is counted by both sources, while an idle
 * wait (the thread asleep, as while it waits for the database) is not the process's time under schedstat.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { platform } from "node:os"
import * as LoopLag from "../src/internal/LoopLag.ts"

const settings: LoopLag.Settings = { intervalMillis: 50, toleranceMillis: 2 }

const busyWait = (millis: number) =>
  Effect.sync(() => {
    const until = performance.now() + millis
    while (performance.now() < until) {
      // hold the thread: no timer can fire
    }
  })

describe("LoopLag", () => {
  it("timer: counts each tick's lateness past the tolerance, and a stall in progress before its tick fires", () => {
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

  it("schedstat: on-CPU plus run-delay nanoseconds, in milliseconds; anything else is not schedstat", () => {
    assert.closeTo(LoopLag.schedstatMillis("319266000 513827000 3\n")!, 833.093, 1e-9)
    assert.isUndefined(LoopLag.schedstatMillis(""))
    assert.isUndefined(LoopLag.schedstatMillis("12"))
    assert.isUndefined(LoopLag.schedstatMillis("a b c"))
    assert.isUndefined(LoopLag.schedstatMillis("-1 5 1"))
  })

  for (const source of ["timer", "schedstat"] as const) {
    it.live(`${source}: a real busy wait of 300 ms on the event loop is counted`, () =>
      Effect.scoped(Effect.gen(function*() {
        const probe = yield* LoopLag.make({ source })
        if (source === "schedstat" && probe.source !== "schedstat") {
          // only Linux has /proc/self/schedstat; elsewhere the probe falls back to the timer
          assert.notStrictEqual(platform(), "linux")
          return
        }
        assert.strictEqual(probe.source, source)
        // idle first, as the measurement's baseline: the probe's ticks fire on time (part of what is measured)
        yield* Effect.sleep(120)
        const before = yield* probe.stalledMillis
        yield* busyWait(300)
        const after = yield* probe.stalledMillis
        assert.isAtLeast(after - before, 300 - settings.intervalMillis - settings.toleranceMillis)
      })))
  }

  it.live("schedstat: an idle wait (the thread asleep, as while the database answers) is not the process's time", () =>
    Effect.scoped(Effect.gen(function*() {
      const probe = yield* LoopLag.make()
      if (probe.source !== "schedstat") return assert.notStrictEqual(platform(), "linux")
      const before = yield* probe.stalledMillis
      yield* Effect.sleep(500) // the idle wait is the thing measured
      const after = yield* probe.stalledMillis
      assert.isBelow(after - before, 250)
    })))
})
