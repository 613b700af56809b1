/**
 * Entry point: `node --conditions=@resilience/source apps/api/src/main.ts`. Reads the environment (an invalid
 * value stops the process naming the variable), serves the API on `API_PORT` with JSON logs at once, and makes
 * `DB_SCHEMA` ready in the background (migrating it when `API_MIGRATE` is set) whether or not the database
 * answers: until then data routes and `/readyz` answer 503 with `Retry-After`. Only a misconfigured database
 * (bad credentials, unknown database, no privilege) stops the process. SIGINT/SIGTERM stop it gracefully. With
 * `OTEL_EXPORTER_OTLP_ENDPOINT` set, its spans (HTTP, `db.acquire`, …) are exported over OTLP.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbSession } from "@resilience/db-session"
import { Variables } from "@resilience/environment"
import { ProcessExit, SchemaMigration } from "@resilience/schema"
import { Otlp } from "@resilience/telemetry"
import { Context, Effect, Layer, Logger, References } from "effect"
import * as Http from "./Http.ts"
import * as Settings from "./Settings.ts"

const LogLevel = Layer.unwrap(Effect.gen(function*() {
  const level = yield* Settings.logLevelConfig
  return Layer.succeed(References.MinimumLogLevel, level)
}))

const Main = Http.server.pipe(
  Layer.provide(DbSession.layerConfig(Variables.database)),
  Layer.provide(Settings.layerConfig)
)

Effect.scoped(Effect.gen(function*() {
  const context = yield* Layer.build(Main)
  yield* Context.get(context, SchemaMigration.SchemaMigration).await
  return yield* Effect.never
})).pipe(
  Effect.provide(Layer.mergeAll(Logger.layer([Logger.consoleJson]), LogLevel, Otlp.layerFromEnv("resilience-api"))),
  NodeRuntime.runMain({ teardown: ProcessExit.teardown })
)
