/**
 * The gate's timing and state under `TestClock` and a seeded `Random`, in front of a scripted database (an
 * effect that answers or fails with db-session's `DatabaseUnavailable`, counting its runs). The same
 * properties against real PostgreSQL, counted at a TCP proxy, are in Database.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { DatabaseUnavailable } from "@resilience/db-session"
import { Deferred, Effect, Exit, Fiber, Random, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as Gate from "../src/Gate.ts"
import * as Settings from "../src/Settings.ts"
import * as Shed from "../src/Shed.ts"

const unavailable = new DatabaseUnavailable({
  reason: "Saturated",
  code: "53300",
  message: "sorry, too many clients already",
  elapsedMillis: 1
})

/** A scripted database: `answer` decides each call's result; `runs` counts the calls that reached it. */
const database = Effect.gen(function*() {
  const runs = yield* Ref.make(0)
  const healthy = yield* Ref.make(true)
  const call = Effect.gen(function*() {
    yield* Ref.update(runs, (n) => n + 1)
    if (!(yield* Ref.get(healthy))) return yield* unavailable
    return "answer"
  })
  return { runs: Ref.get(runs), setHealthy: (value: boolean) => Ref.set(healthy, value), call }
})

const gateWith = (options: Settings.Options) => Effect.flatMap(Effect.orDie(Settings.make(options)), Gate.make)

const shedReason = (exit: Exit.Exit<unknown, unknown>): string | undefined =>
  Exit.isFailure(exit)
    ? exit.cause.reasons.map((reason) => reason._tag === "Fail" && Shed.isShed(reason.error) ? reason.error.reason : "")
      .find((reason) => reason !== "")
    : undefined

/** Opens the circuit of `gate` with `failures` unavailable calls. */
const trip = (gate: Gate.Gate["Service"], call: Effect.Effect<string, DatabaseUnavailable>, failures: number) =>
  Effect.forEach(Array.from({ length: failures }), () => Effect.exit(gate.run(call)), { discard: true })

/** A gate with `options` in front of the scripted database, after `failures` unavailable calls through it. */
const afterFailures = (options: Settings.Options, failures: number) =>
  Effect.gen(function*() {
    const db = yield* database
    const gate = yield* gateWith(options)
    yield* db.setHealthy(false)
    yield* trip(gate, db.call, failures)
    return { db, gate }
  })

describe("Gate (TestClock, seeded Random)", () => {
  it.effect("unavailability opens the circuit; while open, requests are shed without running", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 3 }, 2)
      assert.strictEqual((yield* gate.snapshot).circuit, "Closed", "two failures in a row do not open it")
      yield* trip(gate, db.call, 1)
      assert.strictEqual((yield* gate.snapshot).circuit, "Open")
      assert.strictEqual(yield* db.runs, 3)
      const exits = yield* Effect.all(Array.from({ length: 50 }, () => Effect.exit(gate.run(db.call))), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(new Set(exits.map(shedReason)), new Set(["CircuitOpen"]))
      assert.strictEqual(yield* db.runs, 3, "no shed request reached the database")
      // The shed error says how long the window still lasts (a floor for Retry-After).
      const windowMillis = yield* Effect.flip(gate.run(db.call)).pipe(
        Effect.map((error) => (error as Shed.Shed).retryAfterMillis ?? Number.NaN)
      )
      yield* TestClock.adjust(300)
      const later = yield* Effect.flip(gate.run(db.call)).pipe(
        Effect.map((error) => (error as Shed.Shed).retryAfterMillis ?? Number.NaN)
      )
      assert.isAtLeast(windowMillis, 500)
      assert.isAtMost(windowMillis, 1_500)
      assert.strictEqual(later, windowMillis - 300)
    }).pipe(Effect.scoped, Random.withSeed("open")))

  it.effect("scattered unavailability below half of the recent checkouts does not open it; a majority does", () =>
    Effect.gen(function*() {
      const db = yield* database
      const gate = yield* gateWith({ tripFailures: 3 })
      for (let i = 0; i < 30; i++) {
        yield* db.setHealthy(i % 3 !== 2)
        yield* Effect.exit(gate.run(db.call))
      }
      assert.strictEqual((yield* gate.snapshot).circuit, "Closed", "one in three unavailable")
      yield* db.setHealthy(false)
      yield* trip(gate, db.call, 2)
      assert.strictEqual((yield* gate.snapshot).circuit, "Open", "four of the last six unavailable")
    }).pipe(Effect.scoped, Random.withSeed("rate")))

  it.effect("the open window is jittered within [(1 − r), (1 + r)] × openMillis, and differs by seed", () =>
    Effect.gen(function*() {
      const windows: Array<number> = []
      for (const seed of ["a", "b", "c", "d", "e", "f"]) {
        const window = yield* Effect.gen(function*() {
          const { db, gate } = yield* afterFailures({ tripFailures: 1, openMillis: 1000, openJitterRatio: 0.5 }, 1)
          yield* db.setHealthy(true)
          // Step the clock 10 ms at a time until a request gets through (the probe).
          for (let elapsed = 10; elapsed <= 2_000; elapsed += 10) {
            yield* TestClock.adjust(10)
            const exit = yield* Effect.exit(gate.run(db.call))
            if (Exit.isSuccess(exit)) return elapsed
            assert.strictEqual(shedReason(exit), "CircuitOpen")
          }
          return Number.NaN
        }).pipe(Effect.scoped, Random.withSeed(seed))
        windows.push(window)
      }
      for (const window of windows) {
        assert.isAtLeast(window, 500)
        assert.isAtMost(window, 1_510)
      }
      assert.isAbove(new Set(windows).size, 3, `windows ${windows.join(", ")} ms`)
    }))

  it.effect("half-open: exactly one probe runs, the others are shed; its answer closes the circuit", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 1, openMillis: 1000, openJitterRatio: 0.5 }, 1)
      yield* db.setHealthy(true)
      yield* TestClock.adjust(1_500)
      const release = yield* Deferred.make<void>()
      const probeStarted = yield* Deferred.make<void>()
      const probe = yield* Effect.forkChild(
        gate.run(
          Effect.andThen(Deferred.succeed(probeStarted, undefined), Effect.andThen(Deferred.await(release), db.call))
        )
      )
      yield* Deferred.await(probeStarted)
      assert.strictEqual((yield* gate.snapshot).circuit, "HalfOpen")
      const others = yield* Effect.all(Array.from({ length: 20 }, () => Effect.exit(gate.run(db.call))), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(new Set(others.map(shedReason)), new Set(["ProbeInFlight"]))
      assert.strictEqual(yield* db.runs, 1, "only the tripping call ran so far (the probe waits)")
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual(yield* Fiber.join(probe), "answer")
      assert.strictEqual(yield* db.runs, 2, "the probe ran once")
      assert.strictEqual((yield* gate.snapshot).circuit, "Closed")
      const after = yield* Effect.all(Array.from({ length: 10 }, () => gate.run(db.call)), { concurrency: 10 })
      assert.strictEqual(after.length, 10)
    }).pipe(Effect.scoped, Random.withSeed("probe")))

  it.effect("a failed probe opens a new window", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 2, openMillis: 1000, openJitterRatio: 0.5 }, 2)
      yield* TestClock.adjust(1_500)
      const probe = yield* Effect.exit(gate.run(db.call))
      assert.isUndefined(shedReason(probe), "the probe ran")
      assert.strictEqual(yield* db.runs, 3)
      assert.strictEqual((yield* gate.snapshot).circuit, "Open", "one failed probe reopens, whatever tripFailures")
      assert.strictEqual(shedReason(yield* Effect.exit(gate.run(db.call))), "CircuitOpen")
      assert.strictEqual(yield* db.runs, 3)
    }).pipe(Effect.scoped, Random.withSeed("reopen")))

  it.effect("queueing bound: a request without a permit within queueTimeoutMillis is shed and never runs", () =>
    Effect.gen(function*() {
      const db = yield* database
      const gate = yield* gateWith({ maxConcurrency: 1, queueTimeoutMillis: 50 })
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkChild(gate.run(Effect.andThen(Deferred.await(release), db.call)))
      yield* Effect.yieldNow
      assert.strictEqual((yield* gate.snapshot).inFlight, 1)
      const waiter = yield* Effect.forkChild(Effect.exit(gate.run(db.call)))
      yield* TestClock.adjust(49)
      assert.isUndefined(waiter.pollUnsafe(), "still waiting inside the bound")
      yield* TestClock.adjust(2)
      const exit = yield* Fiber.join(waiter)
      assert.strictEqual(shedReason(exit), "QueueTimeout")
      assert.strictEqual(yield* db.runs, 0)
      // Within the bound, a waiter gets the permit when the holder finishes.
      const patient = yield* Effect.forkChild(gate.run(db.call))
      yield* TestClock.adjust(20)
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual(yield* Fiber.join(holder), "answer")
      assert.strictEqual(yield* Fiber.join(patient), "answer")
      assert.strictEqual(yield* db.runs, 2)
    }).pipe(Effect.scoped))

  it.effect("the limit decreases under unavailability, bounds concurrency, and recovers after", () =>
    Effect.gen(function*() {
      const db = yield* database
      // A circuit that does not open, to watch the limit alone.
      const gate = yield* gateWith({ maxConcurrency: 16, minConcurrency: 1, tripFailures: 1000 })
      assert.strictEqual((yield* gate.snapshot).limit, 16)
      yield* db.setHealthy(false)
      const limits: Array<number> = []
      for (let i = 0; i < 6; i++) {
        yield* trip(gate, db.call, 1)
        limits.push((yield* gate.snapshot).limit)
      }
      assert.deepStrictEqual(limits, [14, 12, 10, 9, 8, 7])

      yield* db.setHealthy(true)
      let running = 0
      let peak = 0
      const overLimit: Array<string> = []
      const tracked = Effect.gen(function*() {
        running += 1
        peak = Math.max(peak, running)
        const { limit } = yield* gate.snapshot
        if (running > limit) overLimit.push(`${running} running with limit ${limit}`)
        yield* Effect.yieldNow
        yield* Effect.yieldNow
        running -= 1
        return yield* db.call
      })
      const rounds: Array<number> = []
      for (let round = 0; round < 10 && (yield* gate.snapshot).limit < 16; round++) {
        yield* Effect.all(Array.from({ length: 32 }, () => gate.run(tracked)), { concurrency: "unbounded" })
        rounds.push((yield* gate.snapshot).limit)
      }
      assert.strictEqual(rounds[rounds.length - 1], 16, `limit after each round of 32: ${rounds.join(", ")}`)
      assert.isAtMost(rounds.length, 3)
      assert.deepStrictEqual(overLimit, [], "never more requests admitted than the limit")
      assert.isAbove(peak, 7, "the recovered limit admits more than the lowered one")
    }).pipe(Effect.scoped))

  it.effect("an answer slower than slowMillis lowers the limit", () =>
    Effect.gen(function*() {
      const db = yield* database
      const gate = yield* gateWith({ maxConcurrency: 10, slowMillis: 500 })
      const slow = yield* Effect.forkChild(gate.run(Effect.andThen(Effect.sleep(501), db.call)))
      yield* TestClock.adjust(501)
      assert.strictEqual(yield* Fiber.join(slow), "answer")
      assert.strictEqual((yield* gate.snapshot).limit, 9)
    }).pipe(Effect.scoped))

  it.effect("a shed request is counted by reason and marked on the request's span", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 1 }, 1)
      const attributes = yield* Effect.gen(function*() {
        yield* Effect.exit(gate.run(db.call))
        const span = yield* Effect.currentSpan
        return span.attributes
      }).pipe(Effect.withSpan("request"))
      assert.strictEqual(attributes.get("admission.shed"), true)
      assert.strictEqual(attributes.get("admission.shed.reason"), "CircuitOpen")
    }).pipe(Effect.scoped))

  it.effect("disabled: every request runs, whatever the database says", () =>
    Effect.gen(function*() {
      const { db } = yield* afterFailures({ enabled: false, tripFailures: 1 }, 5)
      assert.strictEqual(yield* db.runs, 5)
    }).pipe(Effect.scoped))

  it.effect("consecutive failed probes lengthen the window 1 → 2 → 4 → … → the cap; an answered probe resets it", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 1, openJitterRatio: 0, openMaxMillis: 8_000 }, 1)
      /** The window just opened, as the shed error reports it (the floor of Retry-After), then waits it out. */
      const window = Effect.gen(function*() {
        const shed = yield* Effect.flip(gate.run(db.call))
        assert.strictEqual((shed as Shed.Shed).reason, "CircuitOpen")
        const millis = (shed as Shed.Shed).retryAfterMillis ?? Number.NaN
        yield* TestClock.adjust(millis - 1)
        assert.strictEqual(shedReason(yield* Effect.exit(gate.run(db.call))), "CircuitOpen", "shed until it ends")
        yield* TestClock.adjust(1)
        return millis
      })
      const windows: Array<number> = []
      for (let probe = 0; probe < 6; probe++) {
        windows.push(yield* window)
        const runs = yield* db.runs
        assert.isUndefined(shedReason(yield* Effect.exit(gate.run(db.call))), "the probe ran")
        assert.strictEqual(yield* db.runs, runs + 1, "one attempt per window")
      }
      assert.deepStrictEqual(windows, [1_000, 2_000, 4_000, 8_000, 8_000, 8_000])
      // Answered: closed, and the next trip starts again at the base window.
      windows.length = 0
      windows.push(yield* window)
      yield* db.setHealthy(true)
      assert.strictEqual(yield* gate.run(db.call), "answer")
      assert.strictEqual((yield* gate.snapshot).circuit, "Closed")
      yield* db.setHealthy(false)
      yield* trip(gate, db.call, 1)
      windows.push(yield* window)
      assert.deepStrictEqual(windows, [8_000, 1_000])
    }).pipe(Effect.scoped))

  it.effect("the default cap is 30 s: a long outage settles on one probe per 15–45 s window", () =>
    Effect.gen(function*() {
      const { db, gate } = yield* afterFailures({ tripFailures: 1 }, 1)
      const windows: Array<number> = []
      let elapsed = 0
      let probes = 0
      let probesInLastMinute = 0
      // Two minutes of outage, stepping the clock 100 ms at a time; every step a request arrives.
      while (elapsed < 120_000) {
        const runs = yield* db.runs
        const exit = yield* Effect.exit(gate.run(db.call))
        if ((yield* db.runs) > runs) {
          probes++
          if (elapsed >= 60_000) probesInLastMinute++
          const shed = yield* Effect.flip(gate.run(db.call))
          windows.push((shed as Shed.Shed).retryAfterMillis ?? Number.NaN)
        } else {
          assert.isDefined(shedReason(exit))
        }
        yield* TestClock.adjust(100)
        elapsed += 100
      }
      // The windows after each failed probe (the trip's own 1 s window came before the first).
      const nominal = [2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000, 30_000]
      windows.forEach((window, i) => {
        assert.isAtLeast(window, 0.5 * nominal[i]!, `window ${i}: ${windows.join(", ")}`)
        assert.isAtMost(window, 1.5 * nominal[i]!, `window ${i}: ${windows.join(", ")}`)
      })
      assert.isAtMost(probesInLastMinute, 4, `probes in the last minute; windows ${windows.join(", ")}`)
      assert.isAtLeast(probes, 6)
    }).pipe(Effect.scoped, Random.withSeed("long outage")))
})
