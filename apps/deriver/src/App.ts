/**
 * The deriver app, as layers: configuration from the environment (DESIGN.md's names), optional migrations,
 * one deriver for `DB_SCHEMA`, a Prometheus endpoint and JSON logs. `main.ts` launches it.
 *
 * @since 0.1.0
 */
import { NodeHttpServer } from "@effect/platform-node"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, SchemaName } from "@resilience/deriver"
import { Domain } from "@resilience/domain"
import { Config, Effect, Layer, Logger, Schema } from "effect"
import { HttpRouter } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { createServer } from "node:http"

/**
 * The app's own settings: `DERIVER_MIGRATE` (run the schema's migrations at start; default false) and
 * `DERIVER_METRICS_PORT` (Prometheus endpoint `GET /metrics`; default 9464; 0 picks a free port).
 *
 * @since 0.1.0
 */
export const appConfig = Config.all({
  migrate: Config.Boolean("DERIVER_MIGRATE").pipe(Config.withDefault(false)),
  metricsPort: Config.schema(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 0, maximum: 65535 })),
    "DERIVER_METRICS_PORT"
  ).pipe(
    Config.withDefault(9464)
  )
})

/**
 * Runs the schema's migrations when `DERIVER_MIGRATE` is true, then the deriver for `DB_SCHEMA` with the
 * domain's handlers, until the layer is released (SIGTERM/SIGINT through `NodeRuntime.runMain`).
 *
 * @since 0.1.0
 */
export const deriverLayer = Layer.effectDiscard(
  Effect.gen(function*() {
    const schema = yield* SchemaName.config("DB_SCHEMA")
    const config = yield* DeriverConfig.config
    const { migrate } = yield* appConfig
    if (migrate) yield* Domain.migrate(schema)
    yield* Deriver.start({ schema, handlers: Domain.handlers(schema), config })
  })
)

/**
 * The Prometheus endpoint on `DERIVER_METRICS_PORT`.
 *
 * @since 0.1.0
 */
export const metricsLayer = Layer.unwrap(Effect.gen(function*() {
  const { metricsPort } = yield* appConfig
  return HttpRouter.serve(PrometheusMetrics.layerHttp({ path: "/metrics" })).pipe(
    Layer.provide(NodeHttpServer.layer(createServer, { port: metricsPort, host: "0.0.0.0" }))
  )
}))

/**
 * One JSON object per log line.
 *
 * @since 0.1.0
 */
export const loggerLayer = Logger.layer([Logger.consoleJson])

/**
 * The whole app.
 *
 * @since 0.1.0
 */
export const layer = Layer.mergeAll(deriverLayer, metricsLayer).pipe(
  Layer.provide(DbSession.layerConfig),
  Layer.provide(loggerLayer)
)
