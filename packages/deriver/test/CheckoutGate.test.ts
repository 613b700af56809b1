/**
 * The deriver's checkout gate: `@resilience/admission`'s limit and circuit with the deriver's policy, as pure
 * decisions, then in Effect under `TestClock` (a scripted checkout), then against real PostgreSQL through a
 * counting proxy (the session that handlers get).
 */
import { assert, describe, it } from "@effect/vitest"
import { Controller, type Outcome } from "@resilience/admission"
import { ConnectGuard, DatabaseUnavailable, DbSession } from "@resilience/db-session"
import type { Driver } from "@resilience/db-session"
import type { PollBackoff } from "@resilience/jitter"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy, Eventually } from "@resilience/test-db"
import { Context, Effect, Exit, Fiber, Latch, Layer, Ref, type Scope } from "effect"
import { TestClock } from "effect/testing"
import * as CheckoutGate from "../src/internal/CheckoutGate.ts"

const backoff: PollBackoff.Settings = { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0 }
const policy = CheckoutGate.policy(9, backoff)
const draw = () => 0.5

/** A checkout ended with `outcome` at `now`: the limit learns from it. */
const finish = (state: Controller.State, outcome: Outcome.Outcome, now: number) =>
  Controller.learn(state, policy, { sample: { outcome, inFlight: 1, millis: 0 }, now, draw })

/** `n` checkouts each make a connection attempt at `now` (all begun before any ends), and all fail as unavailable. */
const failAll = (state: Controller.State, n: number, now: number) => {
  let next = state
  const probes: Array<boolean> = []
  for (let i = 0; i < n; i++) {
    const [decision, attempting] = Controller.enter(next, now)
    assert.include(["pass", "probe"], decision)
    probes.push(decision === "probe")
    next = attempting
  }
  for (const probe of probes) {
    next = Controller.settle(next, policy, { outcome: "Unavailable", probe, now, draw })
    next = finish(next, "Unavailable", now)
  }
  return next
}

/** One checkout that makes a connection attempt (the probe, if the circuit says so) and ends with `outcome`. */
const attemptOnce = (state: Controller.State, outcome: "Answered" | "Unavailable", now: number, early = false) => {
  const [decision, attempting] = Controller.enter(state, now, early)
  assert.notStrictEqual(decision, "shed")
  const attempted = Controller.settle(attempting, policy, { outcome, probe: decision === "probe", now, draw })
  return finish(attempted, outcome, now)
}

/** One checkout on a connection the pool already had (no attempt), ending with `outcome`. */
const reuseOnce = (state: Controller.State, outcome: "Answered" | "Unavailable", now: number) =>
  finish(state, outcome, now)

describe("CheckoutGate.policy (pure, on the admission controller's transitions)", () => {
  it("a burst of refusals halves the limit to 1, starts one hold and opens the circuit for the base window", () => {
    const state = failAll(Controller.initial(policy), 9, 0)
    assert.strictEqual(state.limit.limit, 1)
    assert.strictEqual(state.limit.growAfter, 1000)
    assert.strictEqual(state.circuit.phase, "Open")
    assert.strictEqual(state.circuit.openUntil, 1000)
    assert.strictEqual(Controller.permits(state), 1, "a checkout may start (it may reuse a connection)")
    assert.strictEqual(Controller.enter(state, 999)[0], "shed", "its attempt waits for the window")
    assert.strictEqual(Controller.enter(state, 1000)[0], "probe", "then probes")
    assert.strictEqual(Controller.enter(state, 10, true)[0], "probe", "the poll may probe at once")
    assert.isFalse(Controller.blocked(state, 10))
    assert.isTrue(Controller.blocked(Controller.enter(state, 10, true)[1], 10), "one probe at a time")
  })

  it("failed probes lengthen the window on the poll schedule (1, 2, 4, … 30 s)", () => {
    let state = failAll(Controller.initial(policy), 9, 0)
    const windows: Array<number> = []
    for (let i = 0; i < 6; i++) {
      const now = state.circuit.openUntil
      assert.strictEqual(Controller.enter(state, now)[0], "probe")
      state = attemptOnce(state, "Unavailable", now)
      windows.push(state.circuit.openUntil - now)
    }
    assert.deepStrictEqual(windows, [2_000, 4_000, 8_000, 16_000, 30_000, 30_000])
  })

  it("an answered probe closes the circuit and ends the hold: the limit climbs one per answer at once", () => {
    let state = attemptOnce(failAll(Controller.initial(policy), 9, 0), "Answered", 1000)
    assert.strictEqual(state.circuit.phase, "Closed")
    assert.strictEqual(state.limit.growAfter, 0)
    assert.strictEqual(state.limit.limit, 2, "the probe's own answer counted")
    for (let i = 0; i < 7; i++) state = reuseOnce(state, "Answered", 1001)
    assert.strictEqual(state.limit.limit, 9)
    assert.strictEqual(Controller.permits(state), 9)
    assert.isFalse(Controller.blocked(state, 1001))
  })

  it("answers on kept connections are no evidence: they neither close the circuit nor end the hold", () => {
    let state = failAll(Controller.initial(policy), 9, 0)
    for (let i = 0; i < 20; i++) state = reuseOnce(state, "Answered", 10 + i)
    assert.strictEqual(state.circuit.phase, "Open", "still open: no new connection was made")
    assert.strictEqual(state.circuit.openUntil, 1000)
    assert.strictEqual(state.limit.limit, 1, "held until 1 s")
    assert.strictEqual(Controller.enter(state, 500)[0], "shed", "a new connection still waits")
    for (let i = 0; i < 20; i++) state = reuseOnce(state, "Answered", 1000 + i)
    assert.strictEqual(state.limit.limit, 9, "after the hold the kept connections' answers grow the limit")
    assert.strictEqual(state.circuit.phase, "Open", "but the circuit stays open until an attempt is answered")
  })

  it("scattered refused attempts lower the limit; the circuit counts attempts only", () => {
    let state = Controller.initial(policy)
    state = attemptOnce(state, "Unavailable", 0) // 9 → 4, hold until 1 s
    for (let i = 0; i < 10; i++) state = attemptOnce(state, "Answered", 10 + i)
    assert.strictEqual(state.limit.limit, 4, "held")
    assert.strictEqual(state.circuit.phase, "Closed", "one refusal among answered attempts")
    state = reuseOnce(state, "Answered", 1000)
    assert.strictEqual(state.limit.limit, 5)
    state = attemptOnce(state, "Unavailable", 1001) // 5 → 2, the next hold is 2 s; 2 of the last 4 attempts refused
    assert.strictEqual(state.limit.limit, 2)
    assert.strictEqual(state.limit.growAfter, 3001)
    assert.strictEqual(state.circuit.phase, "Closed", "1 of the last 4 attempts refused")
    state = attemptOnce(state, "Unavailable", 1002)
    assert.strictEqual(state.circuit.phase, "Open", "2 of the last 4 attempts refused")
  })

  it("POOL_EXHAUSTED lowers the limit but never opens the circuit", () => {
    // POOL_EXHAUSTED: the checkout waited for a slot of its own pool and made no attempt.
    const state = finish(finish(Controller.initial(policy), "Exhausted", 0), "Exhausted", 0)
    assert.strictEqual(state.limit.limit, 2)
    assert.strictEqual(state.circuit.phase, "Closed")
  })

  it("an interrupted checkout tells nothing", () => {
    const [, attempting] = Controller.enter(Controller.initial(policy), 0)
    const settled = finish(
      Controller.settle(attempting, policy, { outcome: "Ignored", probe: false, now: 0, draw }),
      "Ignored",
      0
    )
    assert.deepStrictEqual(settled, Controller.initial(policy))
  })

  it("the draw is taken only when a hold or a window starts", () => {
    let draws = 0
    const counted = () => {
      draws++
      return 0.5
    }
    const jittered = CheckoutGate.policy(9, { ...backoff, ratio: 0.5 })
    let state = Controller.initial(jittered)
    for (let i = 0; i < 5; i++) {
      state = Controller.settle(state, jittered, { outcome: "Answered", probe: false, now: i, draw: counted })
      state = Controller.learn(state, jittered, {
        sample: { outcome: "Answered", inFlight: 1, millis: 0 },
        now: i,
        draw: counted
      })
    }
    assert.strictEqual(draws, 0, "answers draw nothing")
    state = Controller.learn(state, jittered, {
      sample: { outcome: "Unavailable", inFlight: 1, millis: 0 },
      now: 10,
      draw: counted
    })
    assert.strictEqual(draws, 1, "a decrease past the hold starts one, with one draw")
    state = Controller.settle(state, jittered, { outcome: "Unavailable", probe: false, now: 10, draw: counted })
    assert.strictEqual(draws, 1, "one refusal of the last 4 attempts opens no window")
    state = Controller.settle(state, jittered, { outcome: "Unavailable", probe: false, now: 11, draw: counted })
    assert.strictEqual(state.circuit.phase, "Open")
    assert.strictEqual(draws, 2, "the window that opens draws once")
  })
})

const refused = new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "too many", elapsedMillis: 1 })
const connection: Driver.RawConnection = {
  query: () => Effect.succeed([]),
  close: Effect.void,
  cancel: () => Effect.void,
  reusable: () => true,
  invalidate: () => {}
}

/**
 * A checkout that opens a connection (as the null pool does): its attempt goes through the guard in context, is
 * counted in `runs`, and is refused until `healthy`.
 */
const scripted = Effect.gen(function*() {
  const healthy = yield* Ref.make(false)
  const runs = yield* Ref.make(0)
  const checkout = Effect.flatMap(
    Effect.service(ConnectGuard.ConnectGuard),
    (guard) =>
      guard.attempt(Effect.gen(function*() {
        yield* Ref.update(runs, (n) => n + 1)
        if (!(yield* Ref.get(healthy))) return yield* refused
        return connection
      }))
  )
  return { checkout, healthy, runs }
})

describe("CheckoutGate (TestClock)", () => {
  it.effect("workers wait out the window and one probes; the poll probes early; an answer lets everyone go", () =>
    Effect.gen(function*() {
      const gate = yield* CheckoutGate.make({ maxLimit: 3, backoff })
      const { checkout, healthy, runs } = yield* scripted
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
      assert.strictEqual(yield* gate.runNow(checkout, { early: true }), connection)
      assert.strictEqual((yield* gate.state).circuit.phase, "Closed")
      const exits = yield* Fiber.join(workers)
      assert.strictEqual(exits.filter(Exit.isSuccess).length, 2, "the two still waiting ran once it closed")
      assert.strictEqual(yield* Ref.get(runs), 6)
    }))

  it.effect("evidence (a committed write woke the deriver) lets a waiting worker probe at once, at most once per base interval", () =>
    Effect.gen(function*() {
      const gate = yield* CheckoutGate.make({ maxLimit: 3, backoff })
      const { checkout, healthy, runs } = yield* scripted
      for (let i = 0; i < 2; i++) yield* Effect.exit(gate.run(checkout)) // trips: open until 1 s
      // the database stays down: evidence lets one waiting worker probe now, and it fails (open until 100 + 2 s)
      const first = yield* Effect.forkChild(Effect.exit(gate.run(checkout)))
      yield* TestClock.adjust(100)
      assert.strictEqual(yield* Ref.get(runs), 2, "waiting for the window")
      assert.isTrue(yield* gate.evidence)
      yield* TestClock.adjust(0)
      assert.strictEqual(yield* Ref.get(runs), 3, "the waiting worker probed at once")
      assert.isTrue(Exit.isFailure(yield* Fiber.join(first)), "its probe failed: the next window opens")
      const second = yield* Effect.forkChild(Effect.exit(gate.run(checkout)))
      // more evidence within the base interval is not honoured: no attempt
      yield* TestClock.adjust(500)
      assert.isFalse(yield* gate.evidence)
      yield* TestClock.adjust(0)
      assert.strictEqual(yield* Ref.get(runs), 3)
      // the database is back; the next evidence, a base interval after the last, lets the worker through
      yield* Ref.set(healthy, true)
      yield* TestClock.adjust(500)
      assert.isTrue(yield* gate.evidence)
      assert.isTrue(Exit.isSuccess(yield* Fiber.join(second)))
      assert.strictEqual((yield* gate.state).circuit.phase, "Closed")
      assert.strictEqual(yield* Ref.get(runs), 4, "one attempt per honoured evidence")
      assert.isFalse(yield* gate.evidence, "closed: nothing to do")
    }))

  it.effect("nextEvidence completes at the next evidence honoured, not at one turned away", () =>
    Effect.gen(function*() {
      const gate = yield* CheckoutGate.make({ maxLimit: 3, backoff })
      const { checkout } = yield* scripted
      for (let i = 0; i < 2; i++) yield* Effect.exit(gate.run(checkout)) // trips: open until 1 s
      // a worker backing off between batches waits on it (its sleep races it)
      const backingOff = yield* Effect.forkChild(gate.nextEvidence)
      yield* TestClock.adjust(100)
      assert.isUndefined(backingOff.pollUnsafe(), "no evidence yet")
      assert.isTrue(yield* gate.evidence)
      yield* Fiber.join(backingOff)
      // within the base interval evidence is turned away, and a new waiter keeps waiting
      const next = yield* Effect.forkChild(gate.nextEvidence)
      yield* TestClock.adjust(500)
      assert.isFalse(yield* gate.evidence)
      yield* TestClock.adjust(0)
      assert.isUndefined(next.pollUnsafe(), "evidence turned away ends no sleep")
      yield* Fiber.interrupt(next)
    }))
})

/**
 * A 6-connection server, a session of `poolClass` reaching it through a counting proxy (`direct`), a gate for 3
 * checkouts whose windows are a minute long (nothing probes within a test), and the session through that gate.
 */
const gated = (poolClass: "null" | "queue", poolSize: number) =>
  Effect.gen(function*() {
    const cluster = yield* Cluster.start({ maxConnections: 6 })
    const proxy = yield* CountingProxy.start({ host: cluster.host, port: cluster.port })
    const context = yield* Layer.build(DbSession.layer({
      url: proxy.url(cluster.url),
      connectTimeout: "2 seconds",
      poolClass,
      poolSize,
      driver: "pg",
      applicationName: `checkout-gate-${poolClass}`
    }))
    const gate = yield* CheckoutGate.make({
      maxLimit: 3,
      backoff: { ...backoff, baseMillis: 60_000, maxMillis: 60_000 }
    })
    const direct = Context.get(context, DbSession)
    return { cluster, proxy, direct, gate, gatedSession: CheckoutGate.session(gate, direct) }
  })

/** A live test on {@link gated}'s server, proxy, sessions and gate, with two minutes for the real servers' work. */
const onGated = <E>(
  name: string,
  poolClass: "null" | "queue",
  poolSize: number,
  body: (setup: Effect.Success<ReturnType<typeof gated>>) => Effect.Effect<void, E, Scope.Scope>
) => it.live(name, () => gated(poolClass, poolSize).pipe(Effect.flatMap(body), Effect.scoped), 120_000)

describe("CheckoutGate.session against real PostgreSQL (attempts counted at a proxy)", () => {
  onGated(
    "a handler's checkouts through DbSession go through the gate: once it trips, they wait instead of knocking",
    "null",
    1,
    ({ cluster, direct, gate, gatedSession, proxy }) =>
      Effect.gen(function*() {
        // What a handler does: use the DbSession in its context.
        const handler = DbSession.use((db) => db.query("SELECT 1"))
        const asHandler = Effect.provideService(handler, DbSession, gatedSession)
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Effect.orDie(Saturation.hold(cluster.url))
          const before = yield* proxy.attempts
          for (let i = 0; i < 2; i++) assert.isTrue(Exit.isFailure(yield* Effect.exit(asHandler)))
          assert.strictEqual((yield* proxy.attempts) - before, 2)
          assert.strictEqual((yield* gate.state).circuit.phase, "Open")
          const waiting = yield* Effect.forkChild(
            Effect.all(Array.from({ length: 5 }, () => asHandler), { concurrency: 5 })
          )
          // an absence has no event to wait for (and the gate does not expose its waiting checkouts): a window in
          // which a handler that knocked would have shown at the proxy
          yield* Effect.sleep("300 millis")
          assert.strictEqual((yield* proxy.attempts) - before, 2, "five handlers waited: no attempt within the window")
          yield* Fiber.interrupt(waiting)
        }))
        // Released: the poll's early probe closes the circuit, and handlers run again, one attempt each.
        assert.isTrue(
          Exit.isSuccess(
            yield* Effect.exit(gate.runNow(direct.query("SELECT 1"), { early: true }))
          )
        )
        const before = yield* proxy.attempts
        yield* Effect.all(Array.from({ length: 3 }, () => asHandler), { concurrency: 3 })
        assert.strictEqual((yield* proxy.attempts) - before, 3)
      })
  )

  onGated(
    "an in-process pool keeps working on the connection it has while its new connections wait for the circuit",
    "queue",
    3,
    ({ cluster, gate, gatedSession: db, proxy }) =>
      Effect.gen(function*() {
        // a checkout that keeps its connection busy until `done` opens
        const hold = (done: Latch.Latch) => db.withConnection((c) => Effect.andThen(c.query("SELECT 1"), done.await))
        yield* db.query("SELECT 1") // the pool keeps this connection
        yield* Effect.orDie(Saturation.hold(cluster.url))
        const before = yield* proxy.attempts
        // Three at once: one takes the kept connection, two need new ones and are refused: the circuit opens.
        const burstDone = yield* Latch.make()
        const bursting = yield* Effect.forkChild(
          Effect.all(Array.from({ length: 3 }, () => Effect.exit(hold(burstDone))), { concurrency: 3 })
        )
        yield* Eventually.until(
          "two refused attempts while the kept connection is busy",
          Effect.map(proxy.attempts, (attempts) => attempts - before >= 2)
        )
        yield* burstDone.open
        const burst = yield* Fiber.join(bursting)
        assert.strictEqual(burst.filter(Exit.isSuccess).length, 1, "the kept connection served one")
        assert.strictEqual((yield* proxy.attempts) - before, 2)
        assert.strictEqual((yield* gate.state).circuit.phase, "Open")
        // One at a time: every checkout reuses the kept connection; no attempt, and no evidence to close the circuit.
        for (let i = 0; i < 5; i++) yield* db.query("SELECT 1")
        assert.strictEqual((yield* proxy.attempts) - before, 2, "answers on the kept connection made no attempt")
        assert.strictEqual((yield* gate.state).circuit.phase, "Open", "and did not close the circuit")
        // Two at once: the second needs a new connection and waits for the circuit's window instead of knocking.
        const pair = yield* Effect.forkChild(Effect.all([hold(yield* Latch.make()), hold(yield* Latch.make())], {
          concurrency: 2
        }))
        // an absence has no event to wait for: a window in which the second's attempt would have shown at the proxy
        yield* Effect.sleep("600 millis")
        assert.strictEqual((yield* proxy.attempts) - before, 2, "no attempt within the window")
        yield* Fiber.interrupt(pair)
      })
  )
})
