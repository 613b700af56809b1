/**
 * Entry point: `node --conditions=@resilience/source apps/deriver/src/main.ts`. Starts whether or not the
 * database answers; stops only for an invalid setting, a misconfigured database (naming it) or a loop that died
 * of a defect (exit code non-zero, `/healthz` 503). With
 * `OTEL_EXPORTER_OTLP_ENDPOINT` set, its spans (polls, `db.acquire`, …) are exported over OTLP.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ProcessExit, SchemaMigration } from "@resilience/schema"
import { Otlp } from "@resilience/telemetry"
import { Context, Deferred, Effect, Layer } from "effect"
import * as App from "./App.ts"

Effect.scoped(Effect.gen(function*() {
  const context = yield* Layer.build(App.layer)
  yield* Context.get(context, SchemaMigration.SchemaMigration).await
  // A loop that died of a defect ends the process non-zero, so its supervisor restarts it (never a process
  // that is alive and not polling).
  const reason = yield* Deferred.await(Context.get(context, App.Liveness).died)
  return yield* Effect.die(new Error(`deriver loop died: ${reason}`))
})).pipe(
  Effect.provide(Otlp.layerFromEnv("resilience-deriver")),
  NodeRuntime.runMain({ teardown: ProcessExit.teardown })
)
