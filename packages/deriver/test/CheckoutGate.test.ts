import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import * as CheckoutGate from "../src/CheckoutGate.ts"

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }

/** `n` checkouts start (at the current limit), then all fail as unavailable at `now`. */
const failAll = (state: CheckoutGate.State, n: number, now: number) => {
  let next = state
  for (let i = 0; i < n; i++) next = CheckoutGate.started(next)
  for (let i = 0; i < n; i++) next = CheckoutGate.unavailable(next, backoff, now, 0.5, state.limit)
  return next
}

describe("CheckoutGate (pure)", () => {
  it("a burst of refusals halves the limit down to 1 and steps the probe back-off once", () => {
    const state = failAll(CheckoutGate.initial(9, backoff), 9, 0)
    assert.strictEqual(state.limit, 1)
    assert.strictEqual(state.inFlight, 0)
    assert.strictEqual(state.growAfter, 1000, "the next probe: now + the base interval")
    assert.strictEqual(state.probe.currentMillis, 2000, "one step for the whole burst")
    assert.isFalse(CheckoutGate.isBlocked(state, 0), "with limit 1 a kept connection may still be used")
    assert.strictEqual(CheckoutGate.headroom(state, 0), 1)
  })

  it("successes on the kept connection do not raise the limit before the probe time; after it, by one", () => {
    let state = failAll(CheckoutGate.initial(3, backoff), 3, 0)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 500)
    assert.strictEqual(state.limit, 1)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 1000)
    assert.strictEqual(state.limit, 2)
    assert.strictEqual(state.probe.currentMillis, 2000, "growth alone does not reset the probe back-off")
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 1100)
    assert.strictEqual(state.limit, 3)
    assert.strictEqual(state.probe.currentMillis, 1000, "back at the maximum: reset")
  })

  it("refused probes lower the limit again and double the wait for the next one", () => {
    let state = failAll(CheckoutGate.initial(9, backoff), 9, 0) // next probe at 1 s
    const probes: Array<number> = []
    for (let i = 0; i < 5; i++) {
      const at = state.growAfter
      probes.push(at)
      state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, at) // the kept connection: limit 2
      assert.strictEqual(state.limit, 2)
      state = failAll(state, 1, at) // the second checkout needs a new connection: refused
      assert.strictEqual(state.limit, 1)
    }
    assert.deepStrictEqual(probes, [1000, 3000, 7000, 15_000, 31_000], "one probe per back-off interval")
  })

  it("refused at limit 1 (nothing works): every checkout waits for the probe time, then one goes", () => {
    let state = failAll(CheckoutGate.initial(2, backoff), 2, 0) // limit 1, probe 2 s next
    state = failAll(state, 1, 1000) // the one checkout at limit 1 fails too
    assert.isTrue(CheckoutGate.isBlocked(state, 1500))
    assert.isFalse(CheckoutGate.canStart(state, 2999))
    assert.strictEqual(CheckoutGate.headroom(state, 2999), 0)
    assert.isTrue(CheckoutGate.canStart(state, 3000))
    state = CheckoutGate.started(state)
    assert.isFalse(CheckoutGate.canStart(state, 3000), "one at a time")
    state = CheckoutGate.succeeded(state, backoff, 3100)
    assert.isFalse(CheckoutGate.isBlocked(state, 3100))
  })

  it("at limit 1 before the probe time: the lone checkout fails, so every checkout waits for the probe", () => {
    let state = failAll(CheckoutGate.initial(9, backoff), 9, 0) // limit 1, next probe at 1 s, not blocked
    assert.isTrue(CheckoutGate.canStart(state, 200))
    state = CheckoutGate.unavailable(CheckoutGate.started(state), backoff, 200, 0.5, 1)
    assert.isTrue(CheckoutGate.isBlocked(state, 999))
    assert.isTrue(CheckoutGate.canStart(state, 1000))
  })

  it("an interrupted checkout tells nothing: the limit stays", () => {
    const state = CheckoutGate.interrupted(CheckoutGate.started(CheckoutGate.initial(3, backoff)))
    assert.deepStrictEqual(state, CheckoutGate.initial(3, backoff))
  })
})
