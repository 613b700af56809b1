/**
 * The tenant schema's readiness in this API process: migrated (`API_MIGRATE=true`) or found migrated, in the
 * background, whether or not the database answers at start. Until then every data route and `/readyz` answer
 * 503 with `Retry-After` without a checkout of their own.
 *
 * @since 0.1.0
 */
import { SchemaReadiness } from "@resilience/deriver"
import { Domain } from "@resilience/domain"
import { Context, Effect, Layer } from "effect"
import { AppSettings } from "./Settings.ts"

/**
 * The schema's readiness, as a service.
 *
 * @since 0.1.0
 */
export class Readiness extends Context.Service<Readiness, SchemaReadiness.SchemaReadiness>()(
  "@resilience/api-app/Readiness"
) {}

/**
 * Starts the readiness checks (migrations when `migrate` is set) for `settings.schema`.
 *
 * @since 0.1.0
 */
export const layer = Layer.effect(
  Readiness,
  Effect.gen(function*() {
    const settings = yield* AppSettings
    return yield* SchemaReadiness.start({
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
export const ensure = Effect.flatMap(Effect.service(Readiness), (readiness) => readiness.ensure)
