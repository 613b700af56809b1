/**
 * Entry point: `node --conditions=@resilience/source apps/deriver/src/main.ts`. Starts whether or not the
 * database answers; stops only for an invalid setting or a misconfigured database, naming it. With
 * `OTEL_EXPORTER_OTLP_ENDPOINT` set, its spans (polls, `db.acquire`, …) are exported over OTLP.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import { Otlp } from "@resilience/telemetry"
import { Context, Effect, Layer } from "effect"
import * as App from "./App.ts"

Effect.scoped(Effect.gen(function*() {
  const context = yield* Layer.build(App.layer)
  yield* Context.get(context, App.Readiness).await
  return yield* Effect.never
})).pipe(Effect.provide(Otlp.layerFromEnv("resilience-deriver")), NodeRuntime.runMain)
