/**
 * The Effect half of this package: turns the failure of an HTTP handler into the response of
 * {@link ErrorResponse}, logs it, records it on the request's span and counts it; as a function on a cause,
 * as a combinator on any `HttpServerResponse` effect, and as global `HttpRouter` middleware.
 *
 * @since 0.1.0
 */
import type { DbError } from "@resilience/db-session"
import { Cause, Clock, Effect, Layer, Metric, Option } from "effect"
import type * as Config from "effect/Config"
import { HttpRouter, HttpServerRequest, HttpServerRespondable, HttpServerResponse } from "effect/http"
import * as ErrorResponse from "./ErrorResponse.ts"
import * as RetryAfter from "./RetryAfter.ts"

/**
 * How a handler's failure is answered.
 *
 * - `retryAfter`: the `Retry-After` policy of the 503s.
 * - `answers`: which failures this mapping answers for. `"all"` (the default, for router-level use): every
 *   failure and defect that cannot answer for itself (everything that is not an `HttpServerRespondable`,
 *   such as a route-not-found or a request-decoding error). `"database"` (for `HttpApi` middleware, where
 *   other failures are the endpoint's declared errors and must reach their encoder): `@resilience/db-session`
 *   errors, anywhere in the cause, and defects that cannot answer for themselves.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly retryAfter?: RetryAfter.RetryAfter | undefined
  readonly answers?: "all" | "database" | undefined
}

/**
 * Responses written by this package, by status and kind (`Saturated`, `ConnectTimeout`, … for 503;
 * `Misconfigured` or `Unexpected` for 500).
 *
 * @since 0.1.0
 * @category metrics
 */
export const responsesTotal = Metric.counter("api_error_responses_total", {
  description: "Error responses written by @resilience/api-errors, by status and kind",
  incremental: true
})

/**
 * The `Retry-After` of the 503s written by this package, in seconds: what clients were told to wait (the
 * policy's draw, or the rest of an open circuit's window).
 *
 * @since 0.3.0
 * @category metrics
 */
export const retryAfterSeconds = Metric.histogram("api_retry_after_seconds", {
  description: "Retry-After of the 503s written by @resilience/api-errors, in seconds",
  boundaries: [1, 2, 3, 5, 10, 15, 30, 60, 120, 300]
})

const canAnswerForItself = (u: unknown): boolean =>
  HttpServerResponse.isHttpServerResponse(u) || HttpServerRespondable.isRespondable(u)

const isOurs = (cause: Cause.Cause<unknown>, answers: "all" | "database"): boolean =>
  cause.reasons.some((reason) => {
    if (Cause.isFailReason(reason)) {
      return answers === "all" ? !canAnswerForItself(reason.error) : ErrorResponse.isDbError(reason.error)
    }
    if (Cause.isDieReason(reason)) return !canAnswerForItself(reason.defect)
    return false
  })

const toHttp = (response: ErrorResponse.ErrorResponse): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(ErrorResponse.bodyText(response), {
    status: response.status,
    headers: response.headers
  })

const describeRequest = Effect.map(
  Effect.serviceOption(HttpServerRequest.HttpServerRequest),
  Option.match({
    onNone: () => ({}),
    onSome: (request) => ({ "http.method": request.method, "http.url": request.url })
  })
)

const recordOnSpan = (attributes: Record<string, unknown>, exception?: Cause.Cause<unknown>) =>
  Effect.flatMap(
    Effect.option(Effect.currentSpan),
    (span) =>
      Option.isNone(span) ? Effect.void : Effect.map(Clock.currentTimeNanos, (now) => {
        for (const [key, value] of Object.entries(attributes)) span.value.attribute(key, value)
        if (exception !== undefined) {
          const squashed = Cause.squash(exception)
          span.value.event("exception", now, {
            "exception.type": squashed instanceof Error ? squashed.name : typeof squashed,
            "exception.message": squashed instanceof Error ? squashed.message : String(squashed),
            "exception.stacktrace": Cause.pretty(exception)
          })
        }
      })
  )

/**
 * The response for a failed handler's cause, if it is one this mapping answers for (see {@link Options}); a
 * cause of interruptions only is never answered here. Logs (503 at debug level with the reason, 500 at error
 * level with the full cause), records the outcome on the current span and counts it in {@link responsesTotal}.
 *
 * @since 0.1.0
 * @category effects
 */
export const respond = (
  cause: Cause.Cause<unknown>,
  options?: Options
): Effect.Effect<Option.Option<HttpServerResponse.HttpServerResponse>> =>
  Effect.gen(function*() {
    const classification = ErrorResponse.classify(cause)
    if (classification.kind === "Unavailable" || classification.kind === "Transient") {
      const drawn = yield* RetryAfter.draw(options?.retryAfter ?? RetryAfter.defaultPolicy)
      // A request shed by an open circuit is told to wait at least until the circuit lets a probe through.
      const seconds = Math.max(drawn, ErrorResponse.shedRetryAfterSeconds(cause))
      const request = yield* describeRequest
      yield* Effect.logDebug("database temporarily unavailable: answered 503").pipe(
        Effect.annotateLogs({
          ...request,
          "db.unavailable.reason": classification.reason,
          "db.condition": classification.kind,
          "retry.after": seconds
        })
      )
      yield* recordOnSpan({ "db.unavailable.reason": classification.reason, "http.retry_after": seconds })
      yield* Metric.update(Metric.withAttributes(responsesTotal, { status: "503", kind: classification.reason }), 1)
      yield* Metric.update(retryAfterSeconds, seconds)
      return Option.some(toHttp(ErrorResponse.unavailable(seconds)))
    }
    if (Cause.hasInterruptsOnly(cause)) return Option.none()
    if (classification.kind === "Unexpected" && !isOurs(cause, options?.answers ?? "all")) return Option.none()
    const request = yield* describeRequest
    yield* Effect.logError("unexpected failure: answered 500", cause).pipe(
      Effect.annotateLogs({ ...request, "error.kind": classification.kind })
    )
    yield* recordOnSpan({ "error.kind": classification.kind }, cause)
    yield* Metric.update(Metric.withAttributes(responsesTotal, { status: "500", kind: classification.kind }), 1)
    return Option.some(toHttp(ErrorResponse.unexpected))
  })

/**
 * Answers the failures of an HTTP effect that this mapping answers for (see {@link respond}); every other
 * failure passes through unchanged. Apply it to an app before serving it (`HttpServer.serve(handle()(app))`),
 * not as the `middleware` argument of `serve`, which runs after the response is chosen.
 *
 * @since 0.1.0
 * @category effects
 */
export const handle =
  (options?: Options) =>
  <E, R>(self: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>): Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    E,
    R
  > =>
    Effect.catchCause(self, (cause) =>
      Effect.flatMap(
        respond(cause, options),
        Option.match({ onNone: () => Effect.failCause(cause), onSome: Effect.succeed })
      ))

/**
 * The tags of `@resilience/db-session`'s errors, and of a request `@resilience/admission` shed.
 *
 * @since 0.1.0
 * @category models
 */
export type DbErrorTag = DbError["_tag"] | "AdmissionShed"

/**
 * Turns the `@resilience/db-session` errors of an effect into defects, leaving its other errors typed. Use it in
 * `HttpApi` handlers, whose error channel only admits declared errors: a database error that the handler does
 * not answer itself is not part of the endpoint's contract, and {@link respond} (through
 * `ApiMiddleware.DatabaseErrors` or {@link layerRouter}) answers the defect: 503 for what db-session's table
 * calls unavailable or transient and for a shed request, opaque 500 for the rest, with the original error in the
 * log.
 *
 * @since 0.1.0
 * @category effects
 */
export const orDieDbErrors = <A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, { readonly _tag: DbErrorTag }>, R> =>
  Effect.catchIf(
    self,
    (error): error is Extract<E, { readonly _tag: DbErrorTag }> => ErrorResponse.isDbError(error),
    Effect.die
  ) as Effect.Effect<A, Exclude<E, { readonly _tag: DbErrorTag }>, R>

/**
 * Global `HttpRouter` middleware: every route of the router (including `HttpApi` routes and their defects)
 * gets the mapping with `answers: "all"`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRouter = (options?: {
  readonly retryAfter?: RetryAfter.RetryAfter | undefined
}): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.middleware(handle({ retryAfter: options?.retryAfter, answers: "all" }), { global: true })

/**
 * {@link layerRouter} with the `Retry-After` policy read from the environment variables `names` gives
 * ({@link RetryAfter.config}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRouterConfig = (
  names: RetryAfter.Names
): Layer.Layer<never, Config.ConfigError, HttpRouter.HttpRouter> =>
  Layer.unwrap(
    Effect.gen(function*() {
      const retryAfter = yield* RetryAfter.config(names)
      return layerRouter({ retryAfter })
    })
  )
