/**
 * `Retry-After` follows the admission circuit's open window (TestClock): the API's gate with its defaults (but no
 * jitter), a database that stays unavailable, and the 503 that `@resilience/api-errors` answers for each shed
 * request: 1, 2, 4, 8, 16, 30, 30 s as the probes keep failing, counting down within a window, and back to 1 s
 * once a probe is answered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Gate, Settings } from "@resilience/admission"
import { HttpErrors } from "@resilience/api-errors"
import { DatabaseUnavailable } from "@resilience/db-session"
import { Effect, Exit, Option, Ref } from "effect"
import { TestClock } from "effect/testing"

const refused = new DatabaseUnavailable({ reason: "Saturated", code: "53300", message: "too many", elapsedMillis: 1 })

describe("Retry-After follows the open window", () => {
  it.effect("1 → 2 → 4 → 8 → 16 → 30 → 30 s across failed probes; back to 1 s after an answer", () =>
    Effect.gen(function*() {
      const settings = yield* Settings.make({ openJitterRatio: 0 })
      const gate = yield* Gate.make(settings)
      const healthy = yield* Ref.make(false)
      const request = Effect.flatMap(Ref.get(healthy), (ok) => ok ? Effect.succeed("200") : Effect.fail(refused))
      /** The `Retry-After` the API answers for one request now (undefined: it ran and succeeded). */
      const retryAfter = Effect.gen(function*() {
        const exit = yield* Effect.exit(gate.run(request))
        if (Exit.isSuccess(exit)) return undefined
        const response = yield* HttpErrors.respond(exit.cause)
        return Number(Option.getOrThrow(response).headers["retry-after"])
      })
      for (let i = 0; i < settings.tripFailures; i++) yield* retryAfter // trips the circuit
      const windows: Array<number> = []
      for (let probe = 0; probe < 7; probe++) {
        const seconds = (yield* retryAfter)!
        windows.push(seconds)
        yield* TestClock.adjust((seconds - 1) * 1000)
        assert.strictEqual(yield* retryAfter, 1, "counts down: the rest of the window")
        yield* TestClock.adjust(1000)
        yield* retryAfter // the probe, which fails
      }
      assert.deepStrictEqual(windows, [1, 2, 4, 8, 16, 30, 30])
      yield* TestClock.adjust(30_000)
      yield* Ref.set(healthy, true)
      assert.isUndefined(yield* retryAfter, "the probe is answered")
      yield* Ref.set(healthy, false)
      for (let i = 0; i < settings.tripFailures; i++) yield* retryAfter
      assert.strictEqual(yield* retryAfter, 1, "the next outage starts again at the first window")
    }).pipe(Effect.scoped))
})
