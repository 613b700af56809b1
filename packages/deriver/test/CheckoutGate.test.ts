import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import * as CheckoutGate from "../src/CheckoutGate.ts"

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }

/** `n` checkouts start, then all fail as unavailable at `now`. */
const failAll = (state: CheckoutGate.State, n: number, now: number) => {
  let next = state
  for (let i = 0; i < n; i++) next = CheckoutGate.started(next)
  for (let i = 0; i < n; i++) next = CheckoutGate.unavailable(next, backoff, now, 0.5)
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
    let state = failAll(CheckoutGate.initial(9, backoff), 9, 0)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 500)
    assert.strictEqual(state.limit, 1)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 1000)
    assert.strictEqual(state.limit, 2)
    assert.strictEqual(state.probe.currentMillis, 1000, "growth resets the probe back-off")
  })

  it("a refused probe lowers the limit again and doubles the wait for the next one", () => {
    let state = failAll(CheckoutGate.initial(9, backoff), 9, 0)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 1000) // limit 2, probe reset
    state = failAll(state, 1, 1200)
    assert.strictEqual(state.limit, 1)
    assert.strictEqual(state.growAfter, 2200)
    state = CheckoutGate.succeeded(CheckoutGate.started(state), backoff, 2200) // limit 2
    state = failAll(state, 1, 2300)
    assert.strictEqual(state.growAfter, 2300 + 1000)
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

  it("an interrupted checkout tells nothing: the limit stays", () => {
    const state = CheckoutGate.interrupted(CheckoutGate.started(CheckoutGate.initial(3, backoff)))
    assert.deepStrictEqual(state, CheckoutGate.initial(3, backoff))
  })
})
