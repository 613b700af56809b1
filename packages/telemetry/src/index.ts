/**
 * `@resilience/telemetry`: spans leave the process over OTLP when the standard `OTEL_*` variables say where.
 *
 * @since 0.1.0
 */

/**
 * `layerFromEnv(defaultServiceName)`: Effect's OTLP trace exporter from `OTEL_EXPORTER_OTLP_ENDPOINT`.
 *
 * @since 0.1.0
 */
export * as Otlp from "./Otlp.ts"
