/**
 * The deriver's one heartbeat for every unit it holds, on the TestClock with the beat's answer given: it beats only
 * after its delay and only the claims held then; a claim found gone interrupts its unit in a handler at once, and
 * otherwise stops the unit before its next handler (a unit's own release must not be cut short); a failed beat is
 * reported and the next one tries again. The statement itself runs against PostgreSQL in Queue.test.ts and, under a
 * running deriver, in Deriver.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Heartbeat from "../src/internal/Heartbeat.ts"
import type * as Queue from "../src/Queue.ts"

const claimOf = (id: string): Queue.Claim => ({ workUnitKey: `unit-${id}`, owner: "me", id })

/** A heartbeat every 100 ms whose beats renew the ids in `renewed` (or fail with `failing`), recorded in `beats`. */
const heartbeatWith = (state: { renewed: Set<string>; failing?: boolean }) =>
  Effect.gen(function*() {
    const beats: Array<ReadonlyArray<string>> = []
    const failures: Array<number> = []
    const heartbeat = yield* Heartbeat.make<Queue.Claim, string>({
      beat: (claims) =>
        Effect.suspend(() => {
          beats.push(claims.map(({ id }) => id))
          return state.failing === true ? Effect.fail("unavailable") : Effect.succeed(state.renewed)
        }),
      delay: Effect.succeed(100),
      onFailure: (_, claims) => Effect.sync(() => failures.push(claims))
    })
    return { heartbeat, beats, failures }
  })

describe("Heartbeat (TestClock)", () => {
  it.effect("beats after its delay, once for every claim held then, and not while none is held", () =>
    Effect.gen(function*() {
      const { beats, heartbeat } = yield* heartbeatWith({ renewed: new Set(["1", "2"]) })
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(beats, [], "no claim held: no statement")
      const release = yield* Deferred.make<void>()
      const one = yield* Effect.forkChild(heartbeat.hold(claimOf("1"), Deferred.await(release)))
      const two = yield* Effect.forkChild(heartbeat.hold(claimOf("2"), Deferred.await(release)))
      yield* Effect.yieldNow
      assert.strictEqual(yield* heartbeat.held, 2)
      yield* TestClock.adjust("99 millis")
      assert.deepStrictEqual(beats, [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(beats, [["1", "2"]], "one beat for both")
      yield* Deferred.succeed(release, undefined)
      assert.isUndefined(yield* Fiber.join(one))
      assert.isUndefined(yield* Fiber.join(two))
      assert.strictEqual(yield* heartbeat.held, 0)
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(beats, [["1", "2"]], "released claims are not beaten")
    }).pipe(Effect.scoped))

  it.effect("a claim found gone while its unit is in a handler interrupts the handler: the unit ends lost", () =>
    Effect.gen(function*() {
      const { heartbeat } = yield* heartbeatWith({ renewed: new Set() })
      const claim = claimOf("7")
      let interrupted = false
      const handler = Effect.never.pipe(Effect.onInterrupt(() => Effect.sync(() => (interrupted = true))))
      const unit = yield* Effect.forkChild(heartbeat.hold(claim, heartbeat.handling(claim, handler)))
      yield* TestClock.adjust("100 millis")
      assert.strictEqual(yield* Fiber.join(unit), "lost")
      assert.isTrue(interrupted, "the handler was interrupted")
    }).pipe(Effect.scoped))

  it.effect("a claim found gone between handlers (its own release, say) is not cut short; its next handler does not run", () =>
    Effect.gen(function*() {
      const { heartbeat } = yield* heartbeatWith({ renewed: new Set() })
      const claim = claimOf("8")
      const recorded = yield* Deferred.make<void>()
      let ran = 0
      const unit = yield* Effect.forkChild(heartbeat.hold(
        claim,
        Effect.gen(function*() {
          yield* heartbeat.handling(claim, Effect.sync(() => ran++))
          // the unit's record (its release) is in flight when the beat finds the row gone
          yield* Deferred.await(recorded)
          const next = yield* heartbeat.handling(claim, Effect.sync(() => ran++))
          return { next }
        })
      ))
      yield* TestClock.adjust("100 millis")
      yield* Deferred.succeed(recorded, undefined)
      assert.deepStrictEqual(
        yield* Fiber.join(unit),
        { next: "lost" },
        "the record finished; the next handler did not start"
      )
      assert.strictEqual(ran, 1)
    }).pipe(Effect.scoped))

  it.effect("a failed beat is reported with the claims it held and gives nothing up; the next beat tries again", () =>
    Effect.gen(function*() {
      const state: { renewed: Set<string>; failing?: boolean } = { renewed: new Set(), failing: true }
      const { beats, failures, heartbeat } = yield* heartbeatWith(state)
      const claim = claimOf("9")
      const done = yield* Deferred.make<void>()
      const unit = yield* Effect.forkChild(heartbeat.hold(claim, heartbeat.handling(claim, Deferred.await(done))))
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(failures, [1])
      state.failing = false
      state.renewed = new Set(["9"])
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(beats, [["9"], ["9"]])
      yield* Deferred.succeed(done, undefined)
      assert.isUndefined(yield* Fiber.join(unit), "renewed: the handler ran to its end")
    }).pipe(Effect.scoped))

  it.effect("the beats stop with the scope", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { beats, heartbeat } = yield* Scope.provide(heartbeatWith({ renewed: new Set(["1"]) }), scope)
      yield* Effect.forkChild(heartbeat.hold(claimOf("1"), Effect.never))
      yield* TestClock.adjust("100 millis")
      yield* Scope.close(scope, Exit.void)
      yield* TestClock.adjust("500 millis")
      assert.strictEqual(beats.length, 1)
    }).pipe(Effect.scoped))
})
