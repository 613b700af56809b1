/**
 * A bound on request bodies, answered with a 413 that says so: `{"detail":"Request body exceeds 1048576 bytes"}`.
 * A declared `Content-Length` above the limit is refused before the body is read; a body that turns out larger
 * while it is read (chunked uploads) is cut off at the limit.
 *
 * @since 0.1.0
 */
import { ByteSize, Cause, Effect } from "effect"
import type { Layer } from "effect"
import { HttpIncomingMessage, HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/**
 * The 413 for a body above `maxBodyBytes`.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: the answer {@link limit} and {@link layerRouter} give.
 * @since 0.1.0
 * @category decisions
 */
export const tooLarge = (maxBodyBytes: number): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(JSON.stringify({ detail: `Request body exceeds ${maxBodyBytes} bytes` }), {
    status: 413,
    headers: { "content-type": "application/json", connection: "close" }
  })

const isBodyTooLarge = (u: unknown): boolean => {
  if (typeof u !== "object" || u === null) return false
  const error = "reason" in u && typeof u.reason === "object" && u.reason !== null ? u.reason : u
  return "_tag" in error && error._tag === "RequestParseError" && "reason" in error && error.reason === "BodyTooLarge"
}

const bodyTooLargeIn = (cause: Cause.Cause<unknown>): boolean =>
  cause.reasons.some((reason) =>
    Cause.isFailReason(reason)
      ? isBodyTooLarge(reason.error)
      : Cause.isDieReason(reason) && isBodyTooLarge(reason.defect)
  )

/**
 * Applies the limit to an HTTP app.
 *
 * @since 0.1.0
 * @category effects
 */
export const limit = (options: { readonly maxBodyBytes: number }) =>
<E, R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> => {
  const response = tooLarge(options.maxBodyBytes)
  const size = ByteSize.bytes(options.maxBodyBytes)
  return Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
    const declared = Number(request.headers["content-length"])
    if (Number.isFinite(declared) && declared > options.maxBodyBytes) return Effect.succeed(response)
    return app.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, size),
      Effect.catchCause((cause) => bodyTooLargeIn(cause) ? Effect.succeed(response) : Effect.failCause(cause))
    )
  })
}

/**
 * The limit as global `HttpRouter` middleware.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRouter = (options: {
  readonly maxBodyBytes: number
}): Layer.Layer<never, never, HttpRouter.HttpRouter> => HttpRouter.middleware(limit(options), { global: true })
