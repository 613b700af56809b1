import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import { Otlp } from "../src/index.ts"

const read = (env: Record<string, string>) => Otlp.config("resilience-api").parse(ConfigProvider.fromUnknown(env))

describe("OTLP settings", () => {
  it.effect("unset: no export; OTEL_EXPORTER_OTLP_ENDPOINT: /v1/traces under it; the traces endpoint wins", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* read({})))
      assert.deepStrictEqual(
        yield* read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }),
        Option.some({ url: "http://collector:4318/v1/traces", serviceName: "resilience-api" })
      )
      assert.deepStrictEqual(
        yield* read({
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:4318/custom",
          OTEL_SERVICE_NAME: "tenant-7-api"
        }),
        Option.some({ url: "http://traces:4318/custom", serviceName: "tenant-7-api" })
      )
      assert.isTrue(
        Option.isNone(yield* read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" }))
      )
    }))

  it.effect("an invalid endpoint is an error naming the variable", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }))
      assert.include(String(error), "OTEL_EXPORTER_OTLP_ENDPOINT")
    }))
})
