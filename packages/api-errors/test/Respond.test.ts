import { assert, describe, it } from "@effect/vitest"
import { HttpErrors, RetryAfter } from "@resilience/api-errors"
import { Cause, Effect, Option } from "effect"
import { badPassword, saturated } from "./fixtures.ts"

const status = (cause: Cause.Cause<unknown>, options?: HttpErrors.Options) =>
  Effect.map(HttpErrors.respond(cause, options), Option.map((response) => response.status))

describe("HttpErrors.respond", () => {
  it.effect("puts the cause of a 500 on the current span: attributes and an exception event", () =>
    Effect.gen(function*() {
      const span = yield* Effect.currentSpan
      yield* HttpErrors.respond(Cause.fail(badPassword))
      const native = span as unknown as {
        readonly attributes: ReadonlyMap<string, unknown>
        readonly events: ReadonlyArray<readonly [string, bigint, Record<string, unknown>]>
      }
      assert.strictEqual(native.attributes.get("error.kind"), "Misconfigured")
      const exception = native.events.find(([name]) => name === "exception")
      assert.isDefined(exception)
      assert.include(String(exception?.[2]["exception.stacktrace"]), "password authentication failed")
    }).pipe(Effect.withSpan("request")))

  it.effect("puts the reason of a 503 on the current span", () =>
    Effect.gen(function*() {
      const span = yield* Effect.currentSpan
      yield* HttpErrors.respond(Cause.fail(saturated))
      const native = span as unknown as { readonly attributes: ReadonlyMap<string, unknown> }
      assert.strictEqual(native.attributes.get("db.unavailable.reason"), "Saturated")
      assert.strictEqual(native.attributes.get("http.retry_after"), 1)
    }).pipe(Effect.withSpan("request")))

  it.effect("a request shed by an open circuit gets Retry-After of at least the rest of its window", () =>
    Effect.gen(function*() {
      const retryAfter = (cause: Cause.Cause<unknown>, seconds: number) =>
        Effect.map(
          HttpErrors.respond(cause, { retryAfter: RetryAfter.fixed(seconds) }),
          (response) => Option.getOrThrow(response).headers["retry-after"]
        )
      const open = { _tag: "AdmissionShed", reason: "CircuitOpen", retryAfterMillis: 1_200 }
      assert.strictEqual(yield* retryAfter(Cause.fail(open), 0), "2", "rounded up")
      assert.strictEqual(yield* retryAfter(Cause.die(open), 1), "2")
      assert.strictEqual(yield* retryAfter(Cause.fail(open), 5), "5", "the policy when it is longer")
      assert.strictEqual(yield* retryAfter(Cause.fail({ _tag: "AdmissionShed", reason: "QueueTimeout" }), 0), "0")
    }))

  it.effect("draws Retry-After from a range, per response", () =>
    Effect.gen(function*() {
      const retryAfter = yield* RetryAfter.make({ seconds: 1, maxSeconds: 5 })
      const seen = new Set<string>()
      for (let i = 0; i < 200; i++) {
        const response = yield* HttpErrors.respond(Cause.fail(saturated), { retryAfter })
        seen.add(Option.getOrThrow(response).headers["retry-after"] ?? "")
      }
      assert.deepStrictEqual([...seen].sort(), ["1", "2", "3", "4", "5"])
    }))

  it.effect("answers: 'database' leaves other failures to their encoders; 'all' answers them", () =>
    Effect.gen(function*() {
      const declared = Cause.fail({ _tag: "WorkspaceExists" })
      assert.isTrue(Option.isNone(yield* status(declared, { answers: "database" })))
      assert.deepStrictEqual(yield* status(declared, { answers: "all" }), Option.some(500))
      assert.deepStrictEqual(yield* status(Cause.fail(badPassword), { answers: "database" }), Option.some(500))
      assert.deepStrictEqual(yield* status(Cause.die("boom"), { answers: "database" }), Option.some(500))
    }))

  it.effect("orDieDbErrors: database errors become defects, other errors stay typed", () =>
    Effect.gen(function*() {
      const db = yield* Effect.exit(HttpErrors.orDieDbErrors(Effect.fail(saturated)))
      assert.isTrue(db._tag === "Failure" && Cause.hasDies(db.cause) && !Cause.hasFails(db.cause))
      const other = yield* Effect.flip(HttpErrors.orDieDbErrors(Effect.fail({ _tag: "WorkspaceExists" } as const)))
      assert.strictEqual(other._tag, "WorkspaceExists")
    }))

  it.effect("interruptions are not answered", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* status(Cause.interrupt(1))))
    }))
})
