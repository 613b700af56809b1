/**
 * The admission controller under `TestClock` and a seeded `Random`, in front of a scripted attempt: its metrics
 * carry their `gate` (two controllers in one process keep apart), its transitions are logged with it, and a
 * permit given back while an attempt waits for the circuit is balanced whatever point an interruption reaches.
 * The API's gate on it: Gate.test.ts and Database.test.ts; the deriver's: packages/deriver/test/CheckoutGate.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { DatabaseUnavailable } from "@resilience/db-session"
import { Data, Deferred, Effect, Exit, Fiber, Logger, Metric, Random, References } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import * as Controller from "../src/Controller.ts"
import * as Metrics from "../src/internal/Metrics.ts"

const unavailable = new DatabaseUnavailable({
  reason: "Saturated",
  code: "53300",
  message: "sorry, too many clients already",
  elapsedMillis: 1
})

class Full extends Data.TaggedError("Full")<{}> {}

/** A limit of `max` with no hold, a circuit tripping on `tripFailures` with 1 s windows (no jitter unless given). */
const policy = (max: number, tripFailures: number, ratio = 0): Controller.Policy => ({
  limit: { minConcurrency: 1, maxConcurrency: max, decreaseRatio: 0.5, slowMillis: 0, growth: "always" },
  breaker: {
    tripFailures,
    windows: { baseMillis: 1000, multiplier: 2, maxMillis: 8000, enabled: true, ratio }
  }
})

const now: Controller.Wait<Full> = { millis: 0, orElse: () => new Full() }

/** One refused attempt through `controller`, held back at once if the circuit says so. */
const refusal = (controller: Controller.Controller) =>
  Effect.exit(
    controller.admit(() => controller.attempt(Effect.fail(unavailable), { orElse: (shed) => shed }), { wait: now })
  )

describe("Controller (TestClock, seeded Random)", () => {
  it.effect("metrics carry the gate: one controller's circuit opening leaves the other's series alone", () =>
    Effect.gen(function*() {
      const api = yield* Controller.make({ policy: policy(4, 1), gate: "test_a", holds: "requests" })
      const deriver = yield* Controller.make({ policy: policy(4, 1), gate: "test_b", holds: "connection attempts" })
      const a = Metrics.forGate("test_a")
      const b = Metrics.forGate("test_b")
      yield* refusal(api)
      assert.strictEqual((yield* Metric.value(a.circuitState)).value, 2, "a open")
      assert.strictEqual((yield* Metric.value(b.circuitState)).value, 0, "b closed")
      assert.strictEqual((yield* Metric.value(a.transition("Closed", "Open"))).count, 1)
      assert.strictEqual((yield* Metric.value(b.transition("Closed", "Open"))).count, 0)
      assert.strictEqual((yield* Metric.value(a.openWindow)).value, 1, "the base window, in seconds")
      assert.strictEqual((yield* Metric.value(a.limit)).value, 2, "an unavailable outcome halves the limit")
      assert.strictEqual((yield* Metric.value(b.limit)).value, 4)
      // Held back: counted as shed for its gate only; the attempt never ran.
      const runs = { n: 0 }
      const held = yield* Effect.exit(
        api.admit(() => api.attempt(Effect.sync(() => runs.n++), { orElse: (shed) => shed }), { wait: now })
      )
      assert.isTrue(Exit.isFailure(held))
      assert.strictEqual(runs.n, 0)
      assert.strictEqual((yield* Metric.value(a.shed("CircuitOpen"))).count, 1)
      assert.strictEqual((yield* Metric.value(b.shed("CircuitOpen"))).count, 0)
      assert.strictEqual((yield* Metric.value(a.admitted)).count, 2)
      yield* refusal(deriver)
      assert.strictEqual((yield* Metric.value(b.circuitState)).value, 2, "b opens on its own refusal")
      // What Prometheus scrapes: one series per gate.
      const text = yield* PrometheusMetrics.format()
      assert.match(text, /admission_circuit_state\{gate="test_a"\} 2/)
      assert.match(text, /admission_circuit_transitions_total\{[^}]*gate="test_b"[^}]*\} 1/)
      // Answered after the window: closed again, the window gauge back to 0.
      yield* TestClock.adjust(1000)
      yield* api.admit(() => api.attempt(Effect.void, { orElse: (shed) => shed }), { wait: now })
      assert.strictEqual((yield* Metric.value(a.circuitState)).value, 0)
      assert.strictEqual((yield* Metric.value(a.transition("HalfOpen", "Closed"))).count, 1)
      assert.strictEqual((yield* Metric.value(a.openWindow)).value, 0)
    }))

  it.effect("transitions are logged with their gate: WARN when it opens, INFO when it closes", () =>
    Effect.gen(function*() {
      const lines: Array<{ level: string; message: string; gate: unknown }> = []
      const capture = Logger.make((options) => {
        lines.push({
          level: options.logLevel,
          message: String(options.message),
          gate: options.fiber.getRef(References.CurrentLogAnnotations)["admission.gate"]
        })
      })
      yield* Effect.gen(function*() {
        const controller = yield* Controller.make({ policy: policy(2, 1, 0.5), gate: "test_log", holds: "things" })
        yield* refusal(controller)
        const open = (yield* controller.state).circuit.openUntil
        assert.isAtLeast(open, 500, "a jittered window, from the seeded draw")
        assert.isAtMost(open, 1500)
        yield* TestClock.adjust(Math.ceil(open))
        yield* controller.admit(() => controller.attempt(Effect.void, { orElse: (shed) => shed }), { wait: now })
      }).pipe(Effect.provide(Logger.layer([capture])), Random.withSeed("log"))
      assert.deepStrictEqual(lines, [
        {
          level: "Warn",
          message: "database unavailable: test_log circuit open, holding back things",
          gate: "test_log"
        },
        { level: "Info", message: "database answered the probe: test_log circuit closed", gate: "test_log" }
      ])
    }))

  it.effect("a waiting attempt gives its permit back, and an interrupted one leaves the permits balanced", () =>
    Effect.gen(function*() {
      const controller = yield* Controller.make({ policy: policy(1, 1), gate: "test_park", holds: "attempts" })
      yield* refusal(controller) // open until 1 s; the limit stays at its minimum, 1
      assert.strictEqual(Controller.permits(yield* controller.state), 1)
      const attempts = { n: 0 }
      const waiting = yield* Effect.forkChild(
        controller.admit(
          (permit) => controller.attempt(Effect.sync(() => attempts.n++), { waiting: permit }),
          { wait: "untilFree" }
        )
      )
      yield* TestClock.adjust(10)
      assert.strictEqual(yield* controller.inFlight, 0, "the waiter gave its permit back")
      // So a checkout that needs no attempt (a kept connection) runs meanwhile, within the limit of 1.
      const other = yield* Deferred.make<void>()
      const reusing = yield* Effect.forkChild(controller.admit(() => Deferred.await(other), { wait: now }))
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* controller.inFlight, 1)
      assert.isTrue(Exit.isFailure(yield* Effect.exit(controller.admit(() => Effect.void, { wait: now }))), "full")
      // The window ends while the permit is taken: the waiter queues for it (the circuit would let it probe).
      yield* TestClock.adjust(1000)
      assert.strictEqual(attempts.n, 0, "no attempt without a permit")
      yield* Fiber.interrupt(waiting)
      yield* Deferred.succeed(other, undefined)
      yield* Fiber.join(reusing)
      assert.strictEqual(yield* controller.inFlight, 0)
      // Balanced: exactly one permit free, not two (no double release) and not none (no leak).
      const first = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(controller.admit(() => Deferred.await(first), { wait: now }))
      yield* TestClock.adjust(1)
      assert.isTrue(Exit.isFailure(yield* Effect.exit(controller.admit(() => Effect.void, { wait: now }))))
      yield* Deferred.succeed(first, undefined)
      yield* Fiber.join(holder)
      assert.strictEqual(attempts.n, 0, "the interrupted waiter never attempted")
      assert.strictEqual((yield* controller.state).circuit.phase, "Open", "nor took the probe with it")
      // The next attempt probes (no probe slot leaked by the interruption).
      yield* controller.admit(
        (permit) => controller.attempt(Effect.sync(() => attempts.n++), { waiting: permit }),
        { wait: "untilFree" }
      )
      assert.strictEqual(attempts.n, 1)
      assert.strictEqual((yield* controller.state).circuit.phase, "Closed")
    }))

  it.effect("waiters wake when an early probe closes the circuit, and go within the limit", () =>
    Effect.gen(function*() {
      const controller = yield* Controller.make({ policy: policy(3, 1), gate: "test_wake", holds: "attempts" })
      yield* refusal(controller) // the limit 3 → 1, open until 1 s
      const ran = { n: 0, peak: 0, running: 0 }
      const tracked = Effect.gen(function*() {
        ran.n++
        ran.running++
        ran.peak = Math.max(ran.peak, ran.running)
        yield* Effect.yieldNow
        ran.running--
      })
      const waiters = yield* Effect.forkChild(
        Effect.all(
          Array.from(
            { length: 4 },
            () => controller.admit((permit) => controller.attempt(tracked, { waiting: permit }), { wait: "untilFree" })
          ),
          { concurrency: "unbounded" }
        )
      )
      yield* TestClock.adjust(100)
      assert.strictEqual(ran.n, 0, "all wait within the window")
      yield* controller.admit(() => controller.attempt(Effect.void, { orElse: (shed) => shed, early: true }), {
        wait: now
      })
      assert.strictEqual((yield* controller.state).circuit.phase, "Closed", "the early probe answered")
      yield* Fiber.join(waiters)
      assert.strictEqual(ran.n, 4, "every waiter ran once the circuit closed, without the clock moving")
      assert.isAtMost(ran.peak, Controller.permits(yield* controller.state), "never more than the limit at once")
    }))
})
