/**
 * The loop's scheduling under `TestClock` and a seeded `Random`, against an in-memory claim source (the only
 * fake in these tests: everything about SQL runs against real PostgreSQL in the other suites).
 */
import { assert, describe, it } from "@effect/vitest"
import type { PollBackoff } from "@resilience/jitter"
import { Cause, Clock, Deferred, Effect, Fiber, Metric, Option, Random, Ref } from "effect"
import { TestClock } from "effect/testing"
import * as DeriverMetrics from "../src/DeriverMetrics.ts"
import * as PollLoop from "../src/PollLoop.ts"

type Step = "empty" | "error" | ReadonlyArray<string>

/** The fake sources' claims are their unit keys. */
const unitKey = (unit: string): string => unit

const settings = (ratio: number): PollBackoff.Settings => ({
  baseMillis: 1000,
  multiplier: 2,
  maxMillis: 30_000,
  enabled: true,
  ratio
})

/** A loop over a scripted source; returns the recorded events and poll times. */
const harness = Effect.fnUntraced(function*(options: {
  readonly script: (index: number) => Step
  readonly ratio: number
  readonly workers?: number
  readonly startupJitterMillis?: number
  readonly initialInterval?: "base" | "max"
  readonly process?: (unit: string) => Effect.Effect<void>
}) {
  const events = yield* Ref.make<ReadonlyArray<PollLoop.Event>>([])
  const polls = yield* Ref.make(0)
  const loop = yield* PollLoop.start({
    key: unitKey,
    poll: () =>
      Effect.gen(function*() {
        const index = yield* Ref.getAndUpdate(polls, (n) => n + 1)
        const step = options.script(index)
        if (step === "error") return yield* Effect.fail("database unavailable")
        return step === "empty" ? [] : step
      }),
    process: options.process ?? (() => Effect.void),
    releaseAll: Effect.void
  }, {
    workers: options.workers ?? 1,
    backoff: settings(options.ratio),
    initialInterval: options.initialInterval,
    startupJitterMillis: options.startupJitterMillis ?? 0,
    cleanupIntervalMillis: 60_000,
    shutdownGraceMillis: 1000,
    observer: (event) => Ref.update(events, (all) => [...all, event])
  })
  const polled = Effect.map(
    Ref.get(events),
    (all) => all.filter((event): event is Extract<PollLoop.Event, { _tag: "Polled" }> => event._tag === "Polled")
  )
  return { loop, polled, polls: Ref.get(polls) }
})

/** A loop over an always-empty source with a 30 s startup window, observed by `observer`. */
const idleLoop = (observer: (event: PollLoop.Event) => Effect.Effect<void>) =>
  PollLoop.start({
    key: unitKey,
    poll: () => Effect.succeed([]),
    process: () => Effect.void,
    releaseAll: Effect.void
  }, {
    workers: 1,
    backoff: settings(0.5),
    startupJitterMillis: 30_000,
    cleanupIntervalMillis: 60_000,
    shutdownGraceMillis: 1000,
    observer
  })

/** Advances the test clock one sleep at a time until `n` polls have been decided. */
const advanceUntil = Effect.fnUntraced(function*(
  polled: Effect.Effect<ReadonlyArray<Extract<PollLoop.Event, { _tag: "Polled" }>>>,
  n: number
) {
  for (let guard = 0; guard < 10_000; guard++) {
    const events = yield* polled
    if (events.length >= n) return events.slice(0, n)
    const last = events.at(-1)
    yield* TestClock.adjust(last === undefined ? 0 : Math.max(1, last.sleepMillis))
  }
  throw new Error("the loop did not poll often enough")
})

describe("PollLoop scheduling (TestClock, seeded Random)", () => {
  /** Schedules at ratio 0: the loop's settings, its outcomes (where asserted) and the sleep after each poll. */
  const schedules: ReadonlyArray<{
    readonly name: string
    readonly seed: string
    readonly loop: Omit<Parameters<typeof harness>[0], "ratio">
    readonly outcomes?: ReadonlyArray<string>
    readonly sleeps: ReadonlyArray<number>
  }> = [
    {
      name: "empty polls at ratio 0 sleep exactly 1, 2, 4, 8, 16, 30, 30 s",
      seed: "empty",
      loop: { script: () => "empty" },
      outcomes: Array(7).fill("empty"),
      sleeps: [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]
    },
    {
      name: "starting at the cap: empty polls sleep 30, 30 s; a claim still resets to 1, 2, 4 s",
      seed: "warm",
      loop: { script: (i) => (i === 2 ? ["unit"] : "empty"), initialInterval: "max" },
      sleeps: [30_000, 30_000, 0, 1000, 2000, 4000]
    },
    {
      name: "a claim resets the backoff and polls again at once",
      seed: "claim",
      loop: { script: (i) => (i === 4 ? ["unit-a"] : "empty"), workers: 2 },
      outcomes: ["empty", "empty", "empty", "empty", "claimed", "empty", "empty", "empty"],
      // 1, 2, 4, 8 — claim: 0 (at once) — then the schedule starts over at the base: 1, 2, 4.
      sleeps: [1000, 2000, 4000, 8000, 0, 1000, 2000, 4000]
    },
    {
      name: "the error branch advances like the empty branch",
      seed: "error",
      loop: { script: () => "error" },
      outcomes: Array(7).fill("error"),
      sleeps: [1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]
    }
  ]
  for (const { loop, name, outcomes, seed, sleeps } of schedules) {
    it.effect(name, () =>
      Effect.gen(function*() {
        const { polled } = yield* harness({ ...loop, ratio: 0 })
        const events = yield* advanceUntil(polled, sleeps.length)
        if (outcomes !== undefined) assert.deepStrictEqual(events.map((e) => e.outcome), outcomes)
        assert.deepStrictEqual(events.map((e) => e.sleepMillis), sleeps)
      }).pipe(Random.withSeed(seed)))
  }

  it.effect("the loop really sleeps those intervals (poll times on the test clock)", () =>
    Effect.gen(function*() {
      const times: Array<number> = []
      const { polled } = yield* harness({
        script: () => "empty",
        ratio: 0,
        process: () => Effect.void
      })
      for (let i = 0; i < 6; i++) {
        const events = yield* advanceUntil(polled, i + 1)
        times.push(yield* Clock.currentTimeMillis)
        assert.strictEqual(events.length, i + 1)
      }
      assert.deepStrictEqual(times.map((t, i) => i === 0 ? 0 : t - times[i - 1]!), [0, 1000, 2000, 4000, 8000, 16_000])
    }).pipe(Random.withSeed("times")))

  it.effect("all workers busy: sleeps a jittered base and does not advance the backoff", () =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<void>()
      const { polled } = yield* harness({
        script: (i) => (i === 0 ? ["unit-a"] : "empty"),
        ratio: 0.5,
        workers: 1,
        process: () => Deferred.await(done)
      })
      const busy = yield* advanceUntil(polled, 7)
      assert.deepStrictEqual(busy.map((e) => e.outcome), ["claimed", ...Array(6).fill("busy")])
      for (const event of busy.slice(1)) {
        assert.isTrue(event.sleepMillis >= 500 && event.sleepMillis <= 1500, `busy sleep ${event.sleepMillis}`)
        assert.strictEqual(event.intervalMillis, 1000)
      }
      assert.isTrue(new Set(busy.slice(1).map((e) => e.sleepMillis)).size > 1, "busy sleeps are jittered")
      yield* Deferred.succeed(done, undefined)
      const after = (yield* advanceUntil(polled, 9)).slice(7)
      // Six busy cycles later the schedule is still at the base: the first empty poll sleeps ~1 s, not ~30 s.
      assert.deepStrictEqual(after.map((e) => e.outcome), ["empty", "empty"])
      assert.isTrue(after[0]!.sleepMillis >= 500 && after[0]!.sleepMillis <= 1500)
      assert.isTrue(after[1]!.sleepMillis >= 1000 && after[1]!.sleepMillis <= 3000)
    }).pipe(Random.withSeed("busy")))

  it.effect("a worker that finishes at t+5 ms gets its next unit at t+5 ms, not after the busy sleep", () =>
    Effect.gen(function*() {
      const starts: Array<readonly [string, number]> = []
      const { polled } = yield* harness({
        script: (i) => (i === 0 ? ["unit-a"] : i === 1 ? ["unit-b"] : "empty"),
        ratio: 0.5,
        workers: 1,
        process: (unit) =>
          Effect.gen(function*() {
            starts.push([unit, yield* Clock.currentTimeMillis])
            yield* Effect.sleep("5 millis") // the scenario: a unit that takes 5 ms (on the test clock)
          })
      })
      // t=0: claimed unit-a, then busy: a jittered base sleep (500–1500 ms) is pending.
      const first = yield* advanceUntil(polled, 2)
      assert.deepStrictEqual(first.map((e) => e.outcome), ["claimed", "busy"])
      assert.isTrue(first[1]!.sleepMillis >= 500 && first[1]!.sleepMillis <= 1500)
      // t=5: unit-a finishes; the freed worker ends the busy sleep, the poller claims unit-b at once.
      yield* TestClock.adjust(5)
      const events = yield* polled
      assert.deepStrictEqual(events.slice(0, 3).map((e) => e.outcome), ["claimed", "busy", "claimed"])
      assert.deepStrictEqual(starts, [["unit-a", 0], ["unit-b", 5]])
      // Let unit-b finish, so the scope's graceful shutdown does not wait on the test clock.
      yield* TestClock.adjust(5)
    }).pipe(Random.withSeed("wake")))

  for (const ratio of [0.1, 0.5, 1]) {
    it.effect(`with ratio ${ratio} every sleep lies in [1 - r, 1 + r] x schedule`, () =>
      Effect.gen(function*() {
        const { polled } = yield* harness({ script: (i) => (i % 3 === 2 ? "error" : "empty"), ratio })
        const events = yield* advanceUntil(polled, 40)
        const schedule = [1000, 2000, 4000, 8000, 16_000, ...Array(35).fill(30_000)] as Array<number>
        events.forEach((event, i) => {
          const nominal = schedule[i]!
          assert.isTrue(
            event.sleepMillis >= (1 - ratio) * nominal && event.sleepMillis <= (1 + ratio) * nominal,
            `sleep ${i}: ${event.sleepMillis} outside [${(1 - ratio) * nominal}, ${(1 + ratio) * nominal}]`
          )
        })
        // The schedule itself is untouched by jitter.
        assert.deepStrictEqual(events.map((e) => e.intervalMillis), [...schedule.slice(1), 30_000])
        assert.isTrue(new Set(events.map((e) => e.sleepMillis)).size > 30, "sleeps are jittered")
      }).pipe(Random.withSeed(`ratio-${ratio}`)))
  }

  it.effect("the same seed gives the same sleeps", () =>
    Effect.gen(function*() {
      const run = Effect.scoped(Effect.gen(function*() {
        const { polled } = yield* harness({ script: () => "empty", ratio: 0.5, startupJitterMillis: 30_000 })
        yield* TestClock.adjust(30_000)
        return (yield* advanceUntil(polled, 10)).map((e) => e.sleepMillis)
      }))
      const a = yield* run.pipe(Random.withSeed("same"))
      const b = yield* run.pipe(Random.withSeed("same"))
      assert.deepStrictEqual(a, b)
    }))

  it.effect("startup jitter delays the first poll within [0, max] and a shutdown cuts it short", () =>
    Effect.gen(function*() {
      const started = yield* Ref.make<number | undefined>(undefined)
      const loop = yield* idleLoop((event) =>
        event._tag === "Started" ? Ref.set(started, event.startupDelayMillis) : Effect.void
      )
      yield* TestClock.adjust(0)
      const delay = yield* Ref.get(started)
      assert.isDefined(delay)
      assert.isTrue(delay! > 0 && delay! <= 30_000)
      // Shut down while the startup sleep is pending: it returns without the clock moving, and nothing polls.
      yield* loop.shutdown
      assert.strictEqual(yield* Clock.currentTimeMillis, 0)
      yield* TestClock.adjust(60_000)
      assert.deepStrictEqual(yield* loop.held, [])
    }).pipe(Random.withSeed("startup")))

  it.effect("startup delays of loops started together spread across the window", () =>
    Effect.gen(function*() {
      const delays: Array<number> = []
      for (let i = 0; i < 200; i++) {
        yield* idleLoop((event) =>
          event._tag === "Started" ? Effect.sync(() => delays.push(event.startupDelayMillis)) : Effect.void
        )
      }
      yield* TestClock.adjust(0)
      assert.strictEqual(delays.length, 200)
      // Ten 3-second buckets, each holding a fair share (uniform: 20 expected per bucket).
      const buckets = Array(10).fill(0) as Array<number>
      for (const d of delays) buckets[Math.min(9, Math.floor(d / 3000))]!++
      for (const count of buckets) assert.isTrue(count >= 8 && count <= 35, `bucket ${count}`)
    }).pipe(Random.withSeed("spread")))

  it.effect("a defect outside a handler cannot go unnoticed: a worker's or the poller's death completes `died`", () =>
    Effect.gen(function*() {
      const deaths = (where: string) =>
        Effect.map(
          Metric.value(Metric.withAttributes(DeriverMetrics.loopDeaths, { where })),
          (state) => state.count
        )
      const workerBefore = yield* deaths("worker")
      const { loop } = yield* harness({
        script: (i) => (i === 0 ? ["u"] : "empty"),
        ratio: 0,
        process: () => Effect.die(new Error("bug in the worker"))
      })
      yield* TestClock.adjust(0)
      const cause = yield* loop.died
      assert.include(Cause.pretty(cause), "bug in the worker")
      assert.strictEqual((yield* deaths("worker")) - workerBefore, 1)

      const pollerBefore = yield* deaths("poller")
      const broken = yield* PollLoop.start({
        key: unitKey,
        poll: () => Effect.die(new Error("bug in the poll")),
        process: () => Effect.void,
        releaseAll: Effect.void
      }, {
        workers: 1,
        backoff: settings(0),
        startupJitterMillis: 0,
        cleanupIntervalMillis: 60_000,
        shutdownGraceMillis: 1000
      })
      yield* TestClock.adjust(0)
      assert.include(Cause.pretty(yield* broken.died), "bug in the poll")
      assert.strictEqual((yield* deaths("poller")) - pollerBefore, 1)
    }))

  it.effect("a shutdown is not a death", () =>
    Effect.gen(function*() {
      const { loop } = yield* harness({ script: () => "empty", ratio: 0 })
      yield* TestClock.adjust(0)
      yield* loop.shutdown
      assert.isTrue(Option.isNone(
        yield* Effect.timeoutOption(loop.died, "1 second").pipe(
          Effect.forkChild,
          Effect.tap(() => TestClock.adjust("1 second")),
          Effect.flatMap(Fiber.join)
        )
      ))
    }))
})

describe("PollLoop prefetch", () => {
  /** One worker, `prefetch` units claimed ahead; each unit takes 100 ms; the poll hands out up to `limit` units. */
  const prefetchLoop = (prefetch: number) =>
    Effect.gen(function*() {
      const limits: Array<number> = []
      const starts: Array<readonly [string, number]> = []
      let next = 0
      const loop = yield* PollLoop.start({
        key: unitKey,
        poll: (limit) =>
          Effect.sync(() => {
            limits.push(limit)
            return Array.from({ length: Math.min(limit, 4 - next) }, () => `u${next++}`)
          }),
        process: (unit) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            starts.push([unit, now])
            return Effect.sleep("100 millis") // the scenario: the unit's work, on the test clock
          }),
        releaseAll: Effect.void
      }, {
        workers: 1,
        prefetch,
        backoff: settings(0),
        startupJitterMillis: 0,
        cleanupIntervalMillis: 60_000,
        shutdownGraceMillis: 1000
      })
      return { loop, limits, starts }
    })

  it.effect("a worker that finishes takes the unit claimed ahead at once; the poller claims the next meanwhile", () =>
    Effect.gen(function*() {
      const { limits, loop, starts } = yield* prefetchLoop(1)
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(starts, [["u0", 0], ["u1", 100], ["u2", 200], ["u3", 300]], "back to back")
      assert.strictEqual(limits[0], 2, "the first poll claims for the free worker and one ahead")
      assert.isAtMost(Math.max(...limits), 2, "never more than workers + prefetch")
      yield* loop.shutdown
    }))

  it.effect("without prefetch the poll claims only for free workers", () =>
    Effect.gen(function*() {
      const { limits, loop, starts } = yield* prefetchLoop(0)
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(starts.map(([unit]) => unit), ["u0", "u1", "u2", "u3"])
      assert.deepStrictEqual([...new Set(limits)], [1])
      yield* loop.shutdown
    }))

  it.effect("a shutdown starts no unit claimed ahead; it stays held for the release", () =>
    Effect.gen(function*() {
      const { loop, starts } = yield* prefetchLoop(1)
      yield* TestClock.adjust("50 millis")
      assert.deepStrictEqual(yield* loop.held, ["u0", "u1"], "one running, one claimed ahead")
      const stopping = yield* Effect.forkChild(loop.shutdown)
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(stopping)
      assert.deepStrictEqual(starts.map(([unit]) => unit), ["u0"], "u1 was not started")
    }))
})

describe("PollLoop claim along", () => {
  const oneWorkerAlong: PollLoop.Options = {
    workers: 1,
    claimAlong: true,
    backoff: settings(0),
    startupJitterMillis: 0,
    cleanupIntervalMillis: 60_000,
    shutdownGraceMillis: 1000
  }
  /** Overload settings under which a claim along of over 50 ms is slow. */
  const slowAlong = { slowPollMillis: 50, maxMillis: 300_000, multiplier: 2, recoveryMillis: 30_000 }

  /**
   * A loop with `claimAlong` on (one worker unless `options` say otherwise) whose poll number i returns what
   * `poll(i, limit)` does; each unit takes 100 ms (on the test clock), then its record claims along what
   * `along(unit, n)` returns when the loop lets it claim `n`. Returns the loop, the record's claims along (unit, n),
   * the units' starts (unit, time) and the number of polls.
   */
  const claimingAlong = (source: {
    readonly poll: (index: number, limit: number) => Effect.Effect<ReadonlyArray<string>, string>
    readonly along: (unit: string, n: number) => Effect.Effect<ReadonlyArray<string>>
    readonly capacity?: () => Effect.Effect<number>
    readonly options?: Partial<PollLoop.Options>
  }) =>
    Effect.gen(function*() {
      const alongs: Array<readonly [string, number]> = []
      const starts: Array<readonly [string, number]> = []
      let polls = 0
      const loop = yield* PollLoop.start({
        key: unitKey,
        poll: (limit) => Effect.suspend(() => source.poll(polls++, limit)),
        process: (unit, along) =>
          Effect.gen(function*() {
            starts.push([unit, yield* Clock.currentTimeMillis])
            yield* Effect.sleep("100 millis") // the scenario: the unit's work, on the test clock
            return yield* along((n) => Effect.suspend(() => (alongs.push([unit, n]), source.along(unit, n))))
          }),
        releaseAll: Effect.void,
        ...(source.capacity === undefined ? {} : { capacity: source.capacity })
      }, { ...oneWorkerAlong, ...source.options })
      return { alongs, loop, polls: () => polls, starts }
    })

  /**
   * `workers` workers, `claimAlong` on; the poll follows `script`; each unit takes 100 ms and, when the loop lets
   * it (`along` > 0), claims the next of u0…u5 that no one has taken, as the record statement would.
   */
  const alongLoop = (script: (index: number, limit: number) => Step, workers = 1) =>
    Effect.suspend(() => {
      let next = 0
      const take = (n: number) => Array.from({ length: Math.max(0, Math.min(n, 6 - next)) }, () => `u${next++}`)
      return claimingAlong({
        poll: (index, limit) => {
          const step = script(index, limit)
          if (step === "error") return Effect.fail("database unavailable")
          return Effect.succeed(step === "empty" ? [] : take(step.length))
        },
        along: (_unit, n) => Effect.sync(() => take(n)),
        options: { workers }
      })
    })

  it.effect("a worker that finishes takes the unit its record claimed at once, with no poll in between", () =>
    Effect.gen(function*() {
      const { alongs, loop, polls, starts } = yield* alongLoop((index) => index === 0 ? ["first"] : "empty")
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(starts, [["u0", 0], ["u1", 100], ["u2", 200], ["u3", 300], ["u4", 400], ["u5", 500]])
      assert.strictEqual(polls(), 1, "the poller claimed only the first unit (its busy sleep is 1 s)")
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(alongs.map(([, along]) => along), [1, 1, 1, 1, 1, 1], "each record may claim one")
      assert.strictEqual(polls(), 2, "u5's record found nothing: the worker is free and the poller polls")
      yield* loop.shutdown
    }))

  it.effect("a record that claims its own unit again (new items came in) keeps it held while it runs", () =>
    Effect.gen(function*() {
      const heldDuring: Array<ReadonlyArray<string>> = []
      let runs = 0
      let loop: PollLoop.PollLoop | undefined
      loop = yield* PollLoop.start({
        key: unitKey,
        poll: () => Effect.succeed(runs === 0 ? ["u"] : []),
        process: (unit, along) =>
          Effect.gen(function*() {
            runs++
            yield* Effect.sleep("100 millis") // the scenario: the unit's work, on the test clock
            if (loop !== undefined) heldDuring.push(yield* loop.held)
            return yield* along((n) => Effect.succeed(runs === 1 && n > 0 ? [unit] : []))
          }),
        releaseAll: Effect.void
      }, oneWorkerAlong)
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(runs, 2)
      assert.deepStrictEqual(heldDuring, [["u"], ["u"]])
      yield* loop.shutdown
    }))

  it.effect("no claim along after a failed poll: the poller's schedule decides when the next claim is made", () =>
    Effect.gen(function*() {
      // two workers: the first poll claims one unit, the second (at once, one worker is free) fails
      const { alongs, loop } = yield* alongLoop((index) => index === 0 ? ["first"] : index === 1 ? "error" : "empty", 2)
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(alongs, [["u0", 0]], "the worker's record claimed nothing")
      yield* loop.shutdown
    }))

  it.effect("no claim along beyond the source's capacity (the checkout gate's limit)", () =>
    Effect.gen(function*() {
      let room = 1
      const { alongs, loop } = yield* claimingAlong({
        poll: (index) => Effect.succeed(index === 0 ? ["u0"] : []),
        along: (unit, n) =>
          Effect.sync(() => {
            if (unit !== "u0") return []
            room = 0 // the gate's limit fell while u0 ran: u1, claimed along, is the last
            return n > 0 ? ["u1"] : []
          }),
        capacity: () => Effect.succeed(room)
      })
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(alongs, [["u0", 1], ["u1", 0]])
      yield* loop.shutdown
    }))

  it.effect("a slow claim along pauses claiming along until the poller's next claim succeeds", () =>
    Effect.gen(function*() {
      const { alongs, loop } = yield* claimingAlong({
        poll: (index) => Effect.succeed(index === 0 ? ["u0"] : index === 1 ? ["u2"] : []),
        along: (unit, n) =>
          unit !== "u0" || n === 0
            ? Effect.succeed([])
            // the scenario: slower than the slow-poll threshold (on the test clock), a thrash signal
            : Effect.as(Effect.sleep("80 millis"), ["u1"]),
        options: { overload: slowAlong }
      })
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
      // u1 (claimed along, slowly) runs with no poll in between: paused; the poll that claims u2 resumes it.
      assert.deepStrictEqual(alongs, [["u0", 1], ["u1", 0], ["u2", 1]])
      yield* loop.shutdown
    }))

  it.effect("a claim along slow only by the process's own lag does not pause claiming along", () =>
    Effect.gen(function*() {
      let processMillis = 0 // the process's own time (LoopLag), advanced by the slow statement below
      const { alongs, loop } = yield* claimingAlong({
        poll: (index) => Effect.succeed(index === 0 ? ["u0"] : []),
        along: (unit, n) =>
          n === 0 || unit === "u2"
            ? Effect.succeed([])
            // the scenario: as slow as the test above, all of it the process's own delay
            : Effect.gen(function*() {
              yield* Effect.sleep("80 millis")
              processMillis += 75
              return [unit === "u0" ? "u1" : "u2"]
            }),
        options: { overload: slowAlong, lag: Effect.sync(() => processMillis) }
      })
      for (let i = 0; i < 5; i++) yield* TestClock.adjust("100 millis")
      // 80 ms elapsed, 75 of them the process's: 5 ms of database time, not slow; u1's record claims u2 along
      assert.deepStrictEqual(alongs, [["u0", 1], ["u1", 1], ["u2", 1]])
      yield* loop.shutdown
    }))

  it.effect("no claim along once a shutdown has begun", () =>
    Effect.gen(function*() {
      const { alongs, loop, starts } = yield* alongLoop((index) => index === 0 ? ["first"] : "empty")
      yield* TestClock.adjust("50 millis")
      const stopping = yield* Effect.forkChild(loop.shutdown)
      yield* TestClock.adjust("100 millis")
      yield* Fiber.join(stopping)
      assert.deepStrictEqual(alongs, [["u0", 0]])
      assert.deepStrictEqual(starts.map(([unit]) => unit), ["u0"])
    }))
})
