/**
 * Whether the tenant schema is ready in this API process: migrated (`API_MIGRATE=true`) or found migrated, in the
 * background (`SchemaGate` of `@resilience/deriver`), whether or not the database answers at start. Until then
 * every data route and `/readyz` answer 503 with `Retry-After` without a checkout of their own.
 *
 * @since 0.1.0
 */
import { SchemaGate } from "@resilience/deriver"
import { Domain } from "@resilience/domain"
import { Context, Effect, Layer } from "effect"
import { AppSettings } from "./Settings.ts"

/**
 * The schema's gate ({@link SchemaGate.SchemaGate}), as a service.
 *
 * @since 0.1.0
 */
export class SchemaReady extends Context.Service<SchemaReady, SchemaGate.SchemaGate>()(
  "@resilience/api-app/SchemaReady"
) {}

/**
 * Starts the schema gate (migrations when `migrate` is set) for `settings.schema`.
 *
 * @since 0.1.0
 */
export const layer = Layer.effect(
  SchemaReady,
  Effect.gen(function*() {
    const settings = yield* AppSettings
    return yield* SchemaGate.start({
      schema: settings.schema,
      components: Domain.components,
      migrate: settings.migrate
    }).pipe(Effect.orDie)
  })
)

/**
 * Fails at once while the schema is not ready: with the database's unavailability (a 503), or its
 * misconfiguration (an opaque 500; the process stops).
 *
 * @since 0.1.0
 */
export const ensure = Effect.flatMap(Effect.service(SchemaReady), (gate) => gate.ensure)
