/**
 * Request validation failures as 400s that say what was wrong: `HttpApi` answers a request whose path, query,
 * headers or body fail their `Schema` with an empty 400; this middleware answers with
 * `{"detail": "Invalid request body: messages[0].peer: Missing key", "errors": [{ "path": […], "message": … }]}`.
 *
 * @since 0.1.0
 */
import { Effect, Schema, SchemaIssue } from "effect"
import type { Layer } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import type { HttpApiError } from "effect/http-api"

/**
 * One problem with a request: where (`["body", "messages", 0, "peer"]`) and what.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Issue = Schema.Struct({
  path: Schema.Array(Schema.Union([Schema.String, Schema.Number])),
  message: Schema.String
})

/**
 * The 400 body: a one-line `detail` naming the first problem, and every problem in `errors`.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidRequest extends Schema.Error<InvalidRequest>("@resilience/api-errors/InvalidRequest")({
  detail: Schema.String,
  errors: Schema.Array(Issue)
}, {
  httpApiStatus: 400,
  description: "The request's path, query, headers or body did not match the API's schema."
}) {}

/**
 * `HttpApi` middleware that turns request decoding failures into {@link InvalidRequest}. Declare it on the API
 * (`.middleware(Validation.RequestValidation)`) and provide {@link layer}. Response encoding failures stay
 * opaque 500s.
 *
 * @since 0.1.0
 * @category middleware
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()(
  "@resilience/api-errors/RequestValidation",
  { error: InvalidRequest }
) {}

const formatter = SchemaIssue.makeFormatterStandardSchemaV1()

const slotNames: Record<string, string> = {
  Params: "path parameter",
  Query: "query parameter",
  Headers: "header",
  Payload: "request body"
}

const pathText = (path: ReadonlyArray<string | number>): string =>
  path.reduce<string>(
    (text, segment) =>
      typeof segment === "number" ? `${text}[${segment}]` : text === "" ? segment : `${text}.${segment}`,
    ""
  )

/**
 * The {@link InvalidRequest} for a decoding failure of one request slot.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: what {@link layer} answers a decoding failure with.
 * @since 0.1.0
 * @category constructors
 */
export const fromSchemaError = (error: HttpApiError.HttpApiSchemaError): InvalidRequest => {
  const slot = error.kind === "Payload" ? "body" : error.kind.toLowerCase()
  const issues = formatter(error.cause.issue).issues.map((issue) => ({
    path: [
      slot,
      ...(issue.path ?? []).map((segment) => {
        const key = typeof segment === "object" && segment !== null && "key" in segment ? segment.key : segment
        return typeof key === "number" ? key : String(key)
      })
    ],
    message: issue.message
  }))
  const first = issues[0]
  const where = first === undefined || first.path.length <= 1 ? "" : `${pathText(first.path.slice(1))}: `
  const detail = `Invalid ${slotNames[error.kind] ?? slot}: ${where}${first?.message ?? "invalid"}`
  return new InvalidRequest({ detail, errors: issues })
}

/**
 * The server side of {@link RequestValidation}.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<RequestValidation> = HttpApiMiddleware.layerSchemaErrorTransform(
  RequestValidation,
  (error) =>
    error.kind === "Body" || error.kind === "ResponseHeaders"
      ? Effect.fail(error)
      : Effect.fail(fromSchemaError(error))
)
