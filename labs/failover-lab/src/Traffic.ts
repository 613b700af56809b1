/**
 * Open-loop client traffic through `@resilience/api-client`: writes arrive as a Poisson process at a fixed
 * rate whatever the API answers (arrival times are drawn ahead, so a slow answer never slows the arrivals),
 * each one message with unique content under its own idempotency key, sent by the client as every SDK user
 * sends it (its retries after `Retry-After` with full jitter, within its retry budget). Every HTTP attempt
 * and every write (for the consistency checker) is recorded in a {@link History.History}.
 */
import { ApiClient } from "@resilience/api-client"
import { ClientWrites } from "@resilience/checker"
import { Clock, Duration, Effect, Exit, Fiber, FiberSet, Random } from "effect"
import { HttpClient } from "effect/http"
import type * as History from "./History.ts"

/** What to send. */
export interface Options {
  readonly apiUrl: string
  readonly workspace: { readonly name: string; readonly token: string }
  /** Writes per second. */
  readonly rate: number
  /** Peers the messages are spread over. */
  readonly peers: number
  /**
   * Sessions the messages are spread over; 0: each write its own session (no two writes share a session and
   * peer).
   */
  readonly sessions: number
  /** A write with no answer within this long is recorded as `unknown`. */
  readonly deadline: Duration.Input
}

/** Running traffic: `stop` ends the arrivals and waits for the writes in flight to end. */
export interface Traffic {
  readonly stop: Effect.Effect<void>
}

/** Wraps the HTTP client so that every attempt of a write (POST) is recorded. */
const recording = (http: HttpClient.HttpClient, history: History.History): HttpClient.HttpClient =>
  HttpClient.transform(http, (send, request) =>
    request.method !== "POST" ? send : Effect.gen(function*() {
      const sentAt = yield* Clock.currentTimeMillis
      return yield* send.pipe(Effect.onExit((exit) =>
        Effect.map(Clock.currentTimeMillis, (answeredAt) => {
          history.attempts.push({
            sentAt,
            answeredAt,
            status: Exit.isSuccess(exit) ? exit.value.status : "transport",
            retryAfter: Exit.isSuccess(exit) && exit.value.headers["retry-after"] !== undefined
          })
        })
      ))
    }))

/** Starts the arrivals in the current scope; the writes' ends and attempts go to `history`. */
export const start = (options: Options, history: History.History) =>
  Effect.gen(function*() {
    const http = recording(yield* HttpClient.HttpClient, history)
    const client = yield* ApiClient.make({ baseUrl: options.apiUrl }).pipe(
      Effect.provideService(HttpClient.HttpClient, http),
      Effect.orDie
    )
    const run = yield* Clock.currentTimeMillis
    const write = (n: number) =>
      Effect.suspend(() => {
        const request = {
          client: "failover-lab",
          workspace: options.workspace.name,
          session: options.sessions > 0 ? `s${n % options.sessions}` : `s${n}`,
          peer: `p${n % options.peers}`,
          content: `write ${n} of run ${run}`
        }
        const index = history.operations.invoke(request)
        return client.appendMessages({
          token: options.workspace.token,
          workspace: request.workspace,
          session: request.session,
          messages: [{ peer: request.peer, content: request.content }],
          idempotencyKey: `failover-${run}-${n}`
        }).pipe(
          Effect.matchEffect({
            onSuccess: () => Effect.sync(() => history.operations.complete(index, "acknowledged")),
            onFailure: (error) =>
              Effect.sync(() =>
                history.operations.complete(
                  index,
                  ClientWrites.outcomeOf(error),
                  `${error._tag} ${error.status ?? "no answer"}${
                    error._tag === "ApiUnavailable" ? ` ${error.gaveUp}` : ""
                  }`
                )
              )
          }),
          Effect.timeoutOrElse({
            duration: options.deadline,
            orElse: () => Effect.sync(() => history.operations.complete(index, "unknown", "no answer in time"))
          })
        )
      })
    const inFlight = yield* FiberSet.make()
    const arrivals = yield* Effect.forkScoped(Effect.gen(function*() {
      let next = yield* Clock.currentTimeMillis
      for (let n = 0;; n++) {
        next += (-Math.log(1 - (yield* Random.next)) / options.rate) * 1000
        const wait = next - (yield* Clock.currentTimeMillis)
        yield* wait > 0 ? Effect.sleep(Duration.millis(wait)) : Effect.yieldNow
        yield* FiberSet.run(inFlight, write(n))
      }
    }))
    return {
      stop: Effect.andThen(Fiber.interrupt(arrivals), FiberSet.awaitEmpty(inFlight))
    } satisfies Traffic
  })
