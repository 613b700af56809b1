/**
 * Entry point: `node --conditions=@resilience/source apps/api/src/main.ts`. Reads the environment (an invalid
 * value stops the process naming the variable), migrates `DB_SCHEMA`, and serves the API on `API_PORT` with
 * JSON logs. SIGINT/SIGTERM stop it gracefully.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import { DbSession } from "@resilience/db-session"
import { Config, Effect, Layer, Logger, References } from "effect"
import * as Http from "./Http.ts"
import * as Settings from "./Settings.ts"

const LogLevel = Layer.unwrap(Effect.gen(function*() {
  const level = yield* Config.LogLevel("API_LOG_LEVEL").pipe(Config.withDefault("Info" as const))
  return Layer.succeed(References.MinimumLogLevel, level)
}))

const Main = Http.server.pipe(
  Layer.provide(DbSession.layerConfig),
  Layer.provide(Settings.layerConfig)
)

Layer.launch(Main).pipe(
  Effect.provide(Layer.mergeAll(Logger.layer([Logger.consoleJson]), LogLevel)),
  NodeRuntime.runMain
)
