/**
 * The deriver's checkout gate: `@resilience/admission`'s limit and circuit with the deriver's policy, as pure
 * decisions, then in Effect under `TestClock` (a scripted checkout), then against real PostgreSQL through a
 * counting proxy (the session that handlers get).
 */
import { assert, describe, it } from "@effect/vitest"
import { DatabaseUnavailable, DbSession } from "@resilience/db-session"
import type { PollBackoff } from "@resilience/jitter"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy } from "@resilience/test-db"
import { Context, Effect, Exit, Fiber, Layer, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as CheckoutGate from "../src/CheckoutGate.ts"

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }
const policy = CheckoutGate.policy(9, backoff)

/** `n` checkouts start, then all fail as unavailable at `now`. */
const failAll = (state: CheckoutGate.State, n: number, now: number) => {
  let next = state
  const probes: Array<boolean> = []
  for (let i = 0; i < n; i++) {
    const [decision, started] = CheckoutGate.admit(next, now)
    assert.include(["pass", "probe"], decision)
    probes.push(decision === "probe")
    next = started
  }
  for (const probe of probes) next = CheckoutGate.settle(next, policy, "Unavailable", probe, now, 0.5)
  return next
}

describe("CheckoutGate (pure)", () => {
  it("a burst of refusals halves the limit to 1, starts one hold and opens the circuit for the base window", () => {
    const state = failAll(CheckoutGate.initial(policy), 9, 0)
    assert.strictEqual(state.limit.limit, 1)
    assert.strictEqual(state.inFlight, 0)
    assert.strictEqual(state.limit.growAfter, 1000)
    assert.strictEqual(state.circuit.phase, "Open")
    assert.strictEqual(state.circuit.openUntil, 1000)
    assert.strictEqual(CheckoutGate.admit(state, 999)[0], "shed", "a worker waits for the window")
    assert.strictEqual(CheckoutGate.admit(state, 1000)[0], "probe", "then probes")
    assert.strictEqual(CheckoutGate.admit(state, 10, true)[0], "probe", "the poll may probe at once")
    assert.isFalse(CheckoutGate.isBlocked(state, 10))
    assert.isTrue(CheckoutGate.isBlocked(CheckoutGate.admit(state, 10, true)[1], 10), "one probe at a time")
  })

  it("failed probes lengthen the window on the poll schedule (1, 2, 4, … 30 s)", () => {
    let state = failAll(CheckoutGate.initial(policy), 9, 0)
    const windows: Array<number> = []
    for (let i = 0; i < 6; i++) {
      const now = state.circuit.openUntil
      const [decision, probing] = CheckoutGate.admit(state, now)
      assert.strictEqual(decision, "probe")
      state = CheckoutGate.settle(probing, policy, "Unavailable", true, now, 0.5)
      windows.push(state.circuit.openUntil - now)
    }
    assert.deepStrictEqual(windows, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000])
  })

  it("an answered probe closes the circuit and ends the hold: the limit climbs one per answer at once", () => {
    let state = failAll(CheckoutGate.initial(policy), 9, 0)
    const [, probing] = CheckoutGate.admit(state, 1000)
    state = CheckoutGate.settle(probing, policy, "Answered", true, 1000, 0.5)
    assert.strictEqual(state.circuit.phase, "Closed")
    assert.strictEqual(state.limit.growAfter, 0)
    assert.strictEqual(state.limit.limit, 2, "the probe's own answer counted")
    for (let i = 0; i < 7; i++) {
      const [, started] = CheckoutGate.admit(state, 1001)
      state = CheckoutGate.settle(started, policy, "Answered", false, 1001, 0.5)
    }
    assert.strictEqual(state.limit.limit, 9)
    assert.strictEqual(CheckoutGate.headroom(state, 1001), 9)
  })

  it("kept connections: scattered refusals lower the limit without opening the circuit; growth waits for the hold", () => {
    let state = CheckoutGate.initial(policy)
    const run = (outcome: "Answered" | "Unavailable", now: number) => {
      const [, started] = CheckoutGate.admit(state, now)
      state = CheckoutGate.settle(started, policy, outcome, false, now, 0.5)
    }
    run("Unavailable", 0) // 9 → 4, hold until 1 s
    for (let i = 0; i < 10; i++) run("Answered", 10 + i)
    assert.strictEqual(state.limit.limit, 4, "held")
    assert.strictEqual(state.circuit.phase, "Closed", "one refusal among answers")
    run("Answered", 1000)
    assert.strictEqual(state.limit.limit, 5)
    run("Unavailable", 1001) // 5 → 2, the next hold is 2 s
    assert.strictEqual(state.limit.limit, 2)
    assert.strictEqual(state.limit.growAfter, 3001)
    assert.strictEqual(state.circuit.phase, "Closed")
  })

  it("the limit bounds concurrent checkouts; POOL_EXHAUSTED lowers it but never opens the circuit", () => {
    let state = CheckoutGate.initial(CheckoutGate.policy(2, backoff))
    const rules = CheckoutGate.policy(2, backoff)
    const [, one] = CheckoutGate.admit(state, 0)
    const [, two] = CheckoutGate.admit(one, 0)
    assert.strictEqual(CheckoutGate.admit(two, 0)[0], "full")
    assert.strictEqual(CheckoutGate.headroom(two, 0), 0)
    state = CheckoutGate.settle(
      CheckoutGate.settle(two, rules, "Exhausted", false, 0, 0.5),
      rules,
      "Exhausted",
      false,
      0,
      0.5
    )
    assert.strictEqual(state.limit.limit, 1)
    assert.strictEqual(state.circuit.phase, "Closed")
  })

  it("an interrupted checkout tells nothing", () => {
    const [, started] = CheckoutGate.admit(CheckoutGate.initial(policy), 0)
    assert.deepStrictEqual(CheckoutGate.settle(started, policy, "Ignored", false, 0, 0.5), CheckoutGate.initial(policy))
  })
})

const refused = new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "too many", elapsedMillis: 1 })

describe("CheckoutGate (TestClock)", () => {
  it.effect("workers wait out the window and one probes; the poll probes early; an answer lets everyone go", () =>
    Effect.gen(function*() {
      const gate = yield* CheckoutGate.make({ maxLimit: 3, backoff })
      const healthy = yield* Ref.make(false)
      const runs = yield* Ref.make(0)
      const checkout = Effect.gen(function*() {
        yield* Ref.update(runs, (n) => n + 1)
        if (!(yield* Ref.get(healthy))) return yield* refused
        return "ok"
      })
      for (let i = 0; i < 2; i++) yield* Effect.exit(gate.run(checkout)) // trips: open until 1 s
      assert.strictEqual((yield* gate.state).circuit.phase, "Open")
      const workers = yield* Effect.forkChild(
        Effect.all(Array.from({ length: 3 }, () => Effect.exit(gate.run(checkout))), { concurrency: 3 })
      )
      yield* TestClock.adjust(999)
      assert.strictEqual(yield* Ref.get(runs), 2, "nobody knocks during the window")
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* Ref.get(runs), 3, "one worker probed at the window's end; it failed")
      assert.strictEqual((yield* gate.state).circuit.openUntil, 3000, "the next window is 2 s")
      // The poll probes before that window ends, and the database answers: the waiting workers go.
      yield* Ref.set(healthy, true)
      yield* TestClock.adjust(500)
      assert.isTrue(Exit.isFailure(yield* Effect.exit(gate.runNow(checkout))), "not early: held back in the window")
      assert.strictEqual(yield* gate.runNow(checkout, { early: true }), "ok")
      assert.strictEqual((yield* gate.state).circuit.phase, "Closed")
      const exits = yield* Fiber.join(workers)
      assert.strictEqual(exits.filter(Exit.isSuccess).length, 2, "the two still waiting ran once it closed")
      assert.strictEqual(yield* Ref.get(runs), 6)
    }))
})

describe("CheckoutGate.session against real PostgreSQL (attempts counted at a proxy)", () => {
  it.live(
    "a handler's checkouts through DbSession go through the gate: once it trips, they wait instead of knocking",
    () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster.start({ maxConnections: 6 })
        const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
        const context = yield* Layer.build(DbSession.layer({
          url: proxy.url(cluster.url),
          connectTimeout: "2 seconds",
          poolClass: "null",
          poolSize: 1,
          driver: "pg",
          applicationName: "checkout-gate-test"
        }))
        const gate = yield* CheckoutGate.make({
          maxLimit: 3,
          backoff: { ...backoff, baseMillis: 60_000, maxMillis: 60_000 }
        })
        const handlerSession = CheckoutGate.session(gate, Context.get(context, DbSession))
        // What a handler does: use the DbSession in its context.
        const handler = DbSession.use((db) => db.query("SELECT 1"))
        const asHandler = Effect.provideService(handler, DbSession, handlerSession)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Effect.orDie(Saturation.hold(cluster.url))
          const before = yield* proxy.attempts
          for (let i = 0; i < 2; i++) assert.isTrue(Exit.isFailure(yield* Effect.exit(asHandler)))
          assert.strictEqual((yield* proxy.attempts) - before, 2)
          assert.strictEqual((yield* gate.state).circuit.phase, "Open")
          const waiting = yield* Effect.forkChild(
            Effect.all(Array.from({ length: 5 }, () => asHandler), { concurrency: 5 })
          )
          yield* Effect.sleep("300 millis")
          assert.strictEqual((yield* proxy.attempts) - before, 2, "five handlers waited: no attempt within the window")
          yield* Fiber.interrupt(waiting)
        }))
        // Released: the poll's early probe closes the circuit, and handlers run again, one attempt each.
        assert.isTrue(
          Exit.isSuccess(
            yield* Effect.exit(gate.runNow(Context.get(context, DbSession).query("SELECT 1"), { early: true }))
          )
        )
        const before = yield* proxy.attempts
        yield* Effect.all(Array.from({ length: 3 }, () => asHandler), { concurrency: 3 })
        assert.strictEqual((yield* proxy.attempts) - before, 3)
      }).pipe(Effect.scoped),
    120_000
  )
})
