/**
 * Waits until a child process says it is ready, from the process itself (its readiness endpoint), never from a
 * log line: whatever its log level, `npm start` knows. While it waits it says what for and when it asks again
 * (`waiting for api: /readyz 503 (database not ready); retrying in 1.7 s`), on the API client's schedule:
 * the child's `Retry-After` as the floor, full jitter on top, capped at 5 s. Fails if the child exits first.
 */
import { ApiClient, RetryPolicy } from "@resilience/api-client"
import { Deferred, Duration, Effect, Random } from "effect"
import { HttpClient } from "effect/http"
import type * as Child from "./Child.ts"

/** Not ready yet: why, and how long the child asked us to wait (its `Retry-After`), if it did. */
export interface Waiting {
  readonly reason: string
  readonly retryAfterMillis: number | undefined
}

const schedule: RetryPolicy.Settings = { maxAttempts: 1, jitter: { baseMillis: 250, capMillis: 5_000 } }

/** Asks `check` until it finds the child ready (`undefined`); fails with `ChildExited` if the child stops first. */
export const wait = (options: {
  readonly child: Child.Child
  readonly check: Effect.Effect<Waiting | undefined>
}) =>
  Effect.raceFirst(
    Effect.gen(function*() {
      for (let asked = 0;; asked++) {
        const waiting = yield* options.check
        if (waiting === undefined) return
        const floor = waiting.retryAfterMillis ?? 0
        const delay = RetryPolicy.delayFrom(Math.min(asked, 10), floor, schedule, yield* Random.next)
        yield* Effect.log(
          `waiting for ${options.child.name}: ${waiting.reason}; retrying in ${(delay / 1000).toFixed(1)} s`
        )
        yield* Effect.sleep(Duration.millis(delay))
      }
    }),
    Deferred.await(options.child.exited)
  )

/** The API's readiness: `GET /readyz` through the API client, one attempt per check. */
export const api = (baseUrl: string) =>
  Effect.map(ApiClient.make({ baseUrl, maxAttempts: 1 }).pipe(Effect.orDie), (client) =>
    client.readyz.pipe(
      Effect.as(undefined),
      Effect.catchTag("ApiUnavailable", (error) =>
        Effect.succeed<Waiting>({
          reason: error.status === 503 ? "/readyz 503 (database not ready)" : "not listening yet",
          retryAfterMillis: error.retryAfterMillis
        })),
      Effect.orDie
    ))

/** The deriver's readiness: `GET /readyz` on its metrics port (200 once it polls, 503 while it waits). */
export const deriver = (metricsBaseUrl: string) =>
  Effect.map(Effect.service(HttpClient.HttpClient), (http) =>
    http.get(`${metricsBaseUrl}/readyz`).pipe(
      Effect.map((response): Waiting | undefined =>
        response.status === 200
          ? undefined
          : { reason: `/readyz ${response.status} (schema not ready)`, retryAfterMillis: undefined }
      ),
      Effect.catch(() => Effect.succeed<Waiting>({ reason: "not listening yet", retryAfterMillis: undefined }))
    ))
