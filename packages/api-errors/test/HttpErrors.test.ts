import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert, describe, it } from "@effect/vitest"
import { ApiMiddleware, HttpErrors, RequestLimits, RetryAfter, Validation } from "@resilience/api-errors"
import { Cause, Context, Effect, Layer, Logger, Metric, Schema } from "effect"
import { FetchHttpClient, HttpRouter, HttpServer, HttpServerResponse } from "effect/http"
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiClient,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiSchema,
  OpenApi
} from "effect/http-api"
import { createServer } from "node:http"
import { badPassword, connectTimeout, saturated, syntaxError } from "./fixtures.ts"

// --- a plain HttpRouter app with the global middleware -------------------------------------------------

class SomethingElse extends Schema.TaggedError<SomethingElse>()("SomethingElse", { secret: Schema.String }) {}

const RouterRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/ok", HttpServerResponse.text("fine")),
  HttpRouter.add("GET", "/saturated", Effect.fail(saturated)),
  HttpRouter.add("GET", "/timeout-defect", Effect.die(connectTimeout)),
  HttpRouter.add("GET", "/misconfigured", Effect.fail(badPassword)),
  HttpRouter.add("GET", "/defect", Effect.die(new Error("secret internals at /srv/app.ts:12"))),
  HttpRouter.add("GET", "/unknown", Effect.fail(new SomethingElse({ secret: "s3cr3t" })))
)

// --- an HttpApi with the HttpApi middleware --------------------------------------------------------------

class Taken extends Schema.TaggedError<Taken>()("Taken", { name: Schema.String }, { httpApiStatus: 409 }) {}

class ThingsApi extends HttpApiGroup.make("things", { topLevel: true }).add(
  HttpApiEndpoint.post("create", "/things", {
    payload: Schema.Struct({ name: Schema.String }),
    success: Schema.Struct({ name: Schema.String }).pipe(HttpApiSchema.status(201)),
    error: Taken
  }),
  HttpApiEndpoint.get("saturated", "/things/saturated", { success: Schema.String }),
  HttpApiEndpoint.get("defect", "/things/defect", { success: Schema.String }),
  HttpApiEndpoint.get("misconfigured", "/things/misconfigured", { success: Schema.String }),
  HttpApiEndpoint.get("statement", "/things/statement", { success: Schema.String })
) {}

class Api extends HttpApi.make("things")
  .add(ThingsApi)
  .middleware(Validation.RequestValidation)
  .middleware(ApiMiddleware.DatabaseErrors)
{}

const ThingsHandlers = HttpApiBuilder.group(Api, "things", (handlers) =>
  handlers.handleAll({
    create: ({ payload }) =>
      payload.name === "taken"
        ? Effect.fail(new Taken({ name: payload.name }))
        : Effect.succeed({ name: payload.name }),
    saturated: () => HttpErrors.orDieDbErrors(Effect.fail(saturated)),
    defect: () => Effect.die(new Error("secret internals")),
    misconfigured: () => HttpErrors.orDieDbErrors(Effect.fail(badPassword)),
    statement: () => HttpErrors.orDieDbErrors(Effect.fail(syntaxError))
  }))

const ApiRoutes = HttpApiBuilder.layer(Api, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide(ThingsHandlers),
  Layer.provide(ApiMiddleware.layer({ retryAfter: RetryAfter.fixed(3) })),
  Layer.provide(Validation.layer)
)

// --- the server ----------------------------------------------------------------------------------------

interface Logged {
  readonly level: string
  readonly message: string
  readonly cause: string
}
class Logs extends Context.Service<Logs, Array<Logged>>()("test/Logs") {}

const captured: Array<Logged> = []
const CapturingLogger = Logger.make((options) => {
  captured.push({
    level: options.logLevel,
    message: String(options.message),
    cause: options.cause.reasons.length === 0 ? "" : Cause.pretty(options.cause)
  })
})

const Server = HttpRouter.serve(
  Layer.mergeAll(
    RouterRoutes,
    ApiRoutes,
    HttpErrors.layerRouter({ retryAfter: RetryAfter.fixed(2) }),
    RequestLimits.layerRouter({ maxBodyBytes: 1024 })
  ),
  { disableListenLog: true, disableLogger: true }
).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provide(Logger.layer([CapturingLogger])),
  Layer.provideMerge(Layer.succeed(Logs, captured))
)

const baseUrl = Effect.map(Effect.service(HttpServer.HttpServer), (server) => HttpServer.formatAddress(server.address))

const get = (path: string, init?: RequestInit) =>
  Effect.flatMap(baseUrl, (url) =>
    Effect.promise(async () => {
      const response = await fetch(`${url}${path}`, init)
      return { status: response.status, headers: response.headers, text: await response.text() }
    }))

/** POSTs a raw JSON body to the test API's `/things`. */
const post = (body: string) => get("/things", { method: "POST", headers: { "content-type": "application/json" }, body })

const unavailableText = "{\"detail\":\"database temporarily unavailable\"}"
const unexpectedText = "{\"detail\":\"An unexpected error occurred\"}"

describe("HttpErrors over real HTTP", () => {
  it.layer(Server)((it) => {
    it.effect("HttpRouter: DatabaseUnavailable → 503 with Retry-After and the JSON body", () =>
      Effect.gen(function*() {
        const response = yield* get("/saturated")
        assert.strictEqual(response.status, 503)
        assert.strictEqual(response.headers.get("retry-after"), "2")
        assert.strictEqual(response.headers.get("content-type"), "application/json")
        assert.strictEqual(response.text, unavailableText)
      }))

    it.effect("HttpRouter: a DatabaseUnavailable defect is still a 503", () =>
      Effect.gen(function*() {
        const response = yield* get("/timeout-defect")
        assert.strictEqual(response.status, 503)
        assert.strictEqual(response.text, unavailableText)
      }))

    it.effect("HttpRouter: misconfiguration, defects and unknown errors → opaque 500, cause in the log", () =>
      Effect.gen(function*() {
        const logs = yield* Logs
        for (
          const [path, secret] of [["/misconfigured", "secret_user"], ["/defect", "secret internals"], [
            "/unknown",
            "SomethingElse"
          ]] as const
        ) {
          logs.length = 0
          const response = yield* get(path)
          assert.strictEqual(response.status, 500, path)
          assert.strictEqual(response.text, unexpectedText)
          assert.isNull(response.headers.get("retry-after"))
          assert.notInclude(response.text, secret)
          const logged = logs.filter((l) => l.level === "Error")
          assert.isTrue(logged.some((l) => l.cause.includes(secret)), `${path}: cause logged`)
        }
      }))

    it.effect("HttpRouter: what answers for itself is left alone (404, success)", () =>
      Effect.gen(function*() {
        assert.strictEqual((yield* get("/nowhere")).status, 404)
        const ok = yield* get("/ok")
        assert.strictEqual(ok.status, 200)
        assert.strictEqual(ok.text, "fine")
      }))

    it.effect("HttpApi: DatabaseUnavailable → 503 with the middleware's Retry-After", () =>
      Effect.gen(function*() {
        const response = yield* get("/things/saturated")
        assert.strictEqual(response.status, 503)
        assert.strictEqual(response.headers.get("retry-after"), "3")
        assert.strictEqual(response.text, unavailableText)
      }))

    it.effect("HttpApi: defects, misconfiguration and failed statements → opaque 500", () =>
      Effect.gen(function*() {
        for (const path of ["/things/defect", "/things/misconfigured", "/things/statement"]) {
          const response = yield* get(path)
          assert.strictEqual(response.status, 500, path)
          assert.strictEqual(response.text, unexpectedText)
        }
      }))

    it.effect("HttpApi: declared errors and request validation pass through", () =>
      Effect.gen(function*() {
        const created = yield* post("{\"name\":\"a\"}")
        assert.strictEqual(created.status, 201)
        const taken = yield* post("{\"name\":\"taken\"}")
        assert.strictEqual(taken.status, 409)
        assert.deepStrictEqual(JSON.parse(taken.text), { _tag: "Taken", name: "taken" })
      }))

    it.effect("Validation: a missing field, a wrong type and malformed JSON are 400s that say what was wrong", () =>
      Effect.gen(function*() {
        const missing = yield* post("{\"nom\":1}")
        assert.strictEqual(missing.status, 400)
        const body = JSON.parse(missing.text)
        assert.strictEqual(body.detail, "Invalid request body: name: Missing key")
        assert.deepStrictEqual(body.errors, [{ path: ["body", "name"], message: "Missing key" }])
        const wrongType = JSON.parse((yield* post("{\"name\":1}")).text)
        assert.include(wrongType.detail, "name")
        assert.include(wrongType.detail, "string")
        const malformed = yield* post("{\"name\":")
        assert.strictEqual(malformed.status, 400)
        assert.include(JSON.parse(malformed.text).detail, "JSON")
      }))

    it.effect("RequestLimits: a declared Content-Length above the limit is a 413 that says so", () =>
      Effect.gen(function*() {
        const response = yield* get("/things", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name: "x".repeat(2000) })
        })
        assert.strictEqual(response.status, 413)
        assert.deepStrictEqual(JSON.parse(response.text), { detail: "Request body exceeds 1024 bytes" })
      }))

    it.effect("RequestLimits: a chunked body that grows above the limit is a 413 too", () =>
      Effect.gen(function*() {
        const chunk = new TextEncoder().encode("x".repeat(600))
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode("{\"name\":\""))
            controller.enqueue(chunk)
            controller.enqueue(chunk)
            controller.enqueue(new TextEncoder().encode("\"}"))
            controller.close()
          }
        })
        const response = yield* get("/things", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: stream,
          duplex: "half"
        } as RequestInit)
        assert.strictEqual(response.status, 413)
        assert.deepStrictEqual(JSON.parse(response.text), { detail: "Request body exceeds 1024 bytes" })
      }))

    it.effect("HttpApi: the OpenAPI document declares the 503 and the 500", () =>
      Effect.gen(function*() {
        const spec = OpenApi.fromApi(Api)
        const responses = spec.paths["/things/saturated"]?.get?.responses ?? {}
        assert.property(responses, "503")
        assert.property(responses, "500")
      }))

    it.effect("HttpApi: a derived client decodes the 503 as DatabaseTemporarilyUnavailable", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const client = yield* HttpApiClient.make(Api, { baseUrl: url })
        const error = yield* Effect.flip(client.saturated())
        assert.instanceOf(error, ApiMiddleware.DatabaseTemporarilyUnavailable)
        assert.strictEqual(
          (error as ApiMiddleware.DatabaseTemporarilyUnavailable).detail,
          "database temporarily unavailable"
        )
      }).pipe(Effect.provide(FetchHttpClient.layer)))

    it.effect("counts what it answered", () =>
      Effect.gen(function*() {
        const before = yield* Metric.value(HttpErrors.retryAfterSeconds)
        const response = yield* get("/saturated")
        const counted = yield* Metric.value(
          Metric.withAttributes(HttpErrors.responsesTotal, { status: "503", kind: "Saturated" })
        )
        assert.isTrue(counted.count >= 1)
        // and what it told the client to wait: this 503's Retry-After, once more
        const told = yield* Metric.value(HttpErrors.retryAfterSeconds)
        assert.strictEqual(told.count, before.count + 1)
        assert.strictEqual(told.sum - before.sum, Number(response.headers.get("retry-after")))
      }))
  })
})
