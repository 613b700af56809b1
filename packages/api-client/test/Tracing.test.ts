/**
 * Traces leave the processes: a local OTLP/HTTP endpoint receives the spans of this test's client and of the
 * real API entry point (a separate process, configured only by `OTEL_EXPORTER_OTLP_ENDPOINT` and
 * `OTEL_SERVICE_NAME`), and one write's trace runs from the client's span through the API to `db.acquire`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cluster } from "@resilience/local-postgres"
import { Otlp } from "@resilience/telemetry"
import { Eventually, HttpStandIn } from "@resilience/test-db"
import { ConfigProvider, Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { ApiClient } from "../src/index.ts"
import { adminToken, spawnApi } from "./support.ts"

/** A readiness wait is one long poll, not a fleet's retries: it gets a budget that does not run out. */
const waiting = { maxTokens: 1_000_000, ratio: 1 }

interface ReceivedSpan {
  readonly service: string
  readonly name: string
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
}

interface OtlpJson {
  readonly resourceSpans?: ReadonlyArray<{
    readonly resource?: { readonly attributes?: ReadonlyArray<{ key: string; value: { stringValue?: string } }> }
    readonly scopeSpans?: ReadonlyArray<{
      readonly spans?: ReadonlyArray<{ name: string; traceId: string; spanId: string; parentSpanId?: string }>
    }>
  }>
}

/** A local OTLP/HTTP (JSON) traces endpoint that keeps what it receives. */
const receiver = Effect.gen(function*() {
  const spans: Array<ReceivedSpan> = []
  const { url } = yield* HttpStandIn.serve((request, response) => {
    let body = ""
    request.on("data", (chunk: Buffer) => (body += chunk.toString()))
    request.on("end", () => {
      const parsed = JSON.parse(body) as OtlpJson
      for (const resource of parsed.resourceSpans ?? []) {
        const service = resource.resource?.attributes?.find((a) => a.key === "service.name")?.value.stringValue
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              service: service ?? "",
              name: span.name,
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId
            })
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}")
    })
  })
  return { url, spans }
})

describe("OTLP export", () => {
  it.live(
    "one write's trace: client span → API → db.acquire, received on a local OTLP endpoint",
    () =>
      Effect.gen(function*() {
        const otlp = yield* receiver
        const cluster = yield* Cluster.start()
        const baseUrl = yield* spawnApi({
          url: cluster.url,
          schema: "traced",
          env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: "api-under-test" }
        })
        // the client's side of the trace, exported by this process
        const traceId = yield* Effect.scoped(
          Effect.gen(function*() {
            const client = yield* ApiClient.make({
              baseUrl,
              maxAttempts: 100,
              maxDelay: "1 second",
              budget: waiting
            })
              .pipe(Effect.orDie)
            yield* Effect.orDie(client.readyz)
            const { token } = yield* Effect.orDie(client.createWorkspace({ adminToken, name: "acme" }))
            return yield* client.appendMessages({
              token,
              workspace: "acme",
              session: "s",
              messages: [{ peer: "alice", content: "follow me" }]
            }).pipe(
              Effect.orDie,
              Effect.andThen(Effect.currentParentSpan),
              Effect.map((span) => span.traceId),
              Effect.withSpan("test.write")
            )
          }).pipe(
            Effect.provide(
              Otlp.layerFromEnv("unused").pipe(
                Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({
                  OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
                  OTEL_SERVICE_NAME: "client-under-test"
                })))
              )
            )
          )
        )
        const inTrace = () => otlp.spans.filter((span) => span.traceId === traceId)
        // The API exports its spans in batches: db.acquire ends (and may arrive) before the request's own span,
        // the one under the client's; wait for both (on a loaded machine the second batch comes later).
        const complete = () => {
          const spans = inTrace()
          const clientIds = new Set(spans.filter((span) => span.service === "client-under-test").map((s) => s.spanId))
          const api = spans.filter((span) => span.service === "api-under-test")
          return api.some((span) => span.name === "db.acquire") &&
            api.some((span) => span.parentSpanId !== undefined && clientIds.has(span.parentSpanId))
        }
        yield* Eventually.until(
          () =>
            `the API's span under the client's and its db.acquire (seen: ${
              inTrace().map((span) => `${span.service}:${span.name}`).join(", ")
            })`,
          Effect.sync(complete),
          { every: "100 millis" }
        )
        const spans = inTrace()
        const summary = spans.map((span) => `${span.service}:${span.name}`).join(", ")
        const client = spans.filter((span) => span.service === "client-under-test")
        const api = spans.filter((span) => span.service === "api-under-test")
        assert.isTrue(client.some((span) => span.name === "ApiClient.appendMessages"), summary)
        assert.isTrue(api.some((span) => span.name === "db.acquire"), summary)
        // the API's spans hang under the client's: some API span's parent is a client span
        const clientIds = new Set(client.map((span) => span.spanId))
        assert.isTrue(api.some((span) => span.parentSpanId !== undefined && clientIds.has(span.parentSpanId)), summary)
      }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer)),
    120_000
  )
})
