/**
 * THE REMOVED BASELINE, for the lab's `baseline` and `jitter-only` policies only: the reference service's
 * `acquire_connection_with_retry`, the checkout loop that docs/changes.md (change 3) removed. A checkout that fails as
 * unavailable is tried again after `min(0.1 s · 2^(k−1) + U(0, 1 s), 2 s)` until a failed attempt finds 10 s
 * spent (the simulator's `RetryBackoff`, which mirrors tenacity's `wait_exponential_jitter` and
 * `stop_after_delay`). A failure after the connection was handed over is not tried again. Nothing outside
 * the lab and the simulator does this; db-session makes exactly one attempt.
 */
import { DbSession } from "@resilience/db-session"
import { RetryBackoff } from "@resilience/fleet-sim"
import { Clock, Duration, Effect, Random } from "effect"

/** Repeats `use` while it fails before the connection is handed over, within the removed schedule's budget. */
const loop = <A, E, R>(
  settings: RetryBackoff.Settings,
  use: (handedOver: Effect.Effect<void>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    for (let attempt = 1;; attempt++) {
      let connected = false
      const exit = yield* Effect.exit(use(Effect.sync(() => {
        connected = true
      })))
      if (exit._tag === "Success") return exit.value
      const failure = exit.cause.reasons.find((reason) => reason._tag === "Fail")
      const unavailable = failure !== undefined && typeof failure.error === "object" && failure.error !== null &&
        "_tag" in failure.error && failure.error._tag === "DatabaseUnavailable"
      const elapsed = (yield* Clock.currentTimeMillis) - startedAt
      if (connected || !unavailable || RetryBackoff.exhausted(settings, elapsed)) return yield* exit
      const u = yield* Random.next
      yield* Effect.sleep(Duration.millis(RetryBackoff.waitFrom(settings, attempt, u)))
    }
  })

/** Wraps a session so that every checkout goes through the removed loop. */
export const wrap = (
  inner: DbSession["Service"],
  settings: RetryBackoff.Settings = RetryBackoff.reference
): DbSession["Service"] =>
  DbSession.of({
    withConnection: (f) =>
      loop(settings, (handedOver) => inner.withConnection((c) => Effect.andThen(handedOver, f(c)))),
    transaction: (f) => loop(settings, (handedOver) => inner.transaction((c) => Effect.andThen(handedOver, f(c)))),
    query: <Row>(sql: string, params?: ReadonlyArray<unknown>) =>
      loop(
        settings,
        (handedOver) => inner.withConnection((c) => Effect.andThen(handedOver, c.query<Row>(sql, params)))
      ),
    oneCheckout: (effect) => loop(settings, (handedOver) => inner.oneCheckout(Effect.andThen(handedOver, effect)))
  })
