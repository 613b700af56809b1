/**
 * Spans leave the process over OTLP/HTTP (JSON) with Effect's own exporter (`effect/observability`
 * `OtlpTracer`), configured from the standard variables:
 *
 * - `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL), or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is
 *   appended): unset, nothing is exported and nothing changes;
 * - `OTEL_SERVICE_NAME`: the `service.name` of the spans (default: the process's own name);
 * - `OTEL_SDK_DISABLED=true` turns the export off.
 *
 * An invalid endpoint stops the process at start, naming the variable.
 *
 * @since 0.1.0
 */
import { Config, Effect, Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"

/**
 * What to export to, read from the environment; `none` when the endpoint is unset or the SDK disabled.
 *
 * @since 0.1.0
 */
export const config = (defaultServiceName: string) =>
  Config.all({
    disabled: Config.Boolean("OTEL_SDK_DISABLED").pipe(Config.withDefault(false)),
    traces: Config.option(Config.URL("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")),
    base: Config.option(Config.URL("OTEL_EXPORTER_OTLP_ENDPOINT")),
    serviceName: Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault(defaultServiceName))
  }).pipe(Config.map(({ base, disabled, serviceName, traces }) => {
    const url = Option.orElse(traces, () =>
      Option.map(base, (endpoint) => {
        const target = new URL(endpoint)
        target.pathname = `${target.pathname.replace(/\/$/, "")}/v1/traces`
        return target
      }))
    return disabled || Option.isNone(url) ? Option.none() : Option.some({ url: url.value.toString(), serviceName })
  }))

/**
 * The exporter when configured, otherwise nothing. Spans are batched and sent every second, and flushed when
 * the process stops.
 *
 * @since 0.1.0
 */
export const layerFromEnv = (
  defaultServiceName: string
): Layer.Layer<OtlpExporter.Flusher, Config.ConfigError> =>
  Layer.unwrap(Effect.map(config(defaultServiceName), (target) =>
    Option.match(target, {
      onNone: () => OtlpExporter.layerFlusher,
      onSome: ({ serviceName, url }) =>
        OtlpTracer.layer({ url, resource: { serviceName }, exportInterval: "1 second" }).pipe(
          Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer])
        )
    })))
