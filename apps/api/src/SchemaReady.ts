/**
 * The tenant schema's migration in this API process (`SchemaMigration` of `@resilience/schema`): `DB_SCHEMA` migrated
 * (`API_MIGRATE=true`) or found migrated, in the background, whether or not the database answers at start. Until
 * then every data route and `/readyz` answer 503 with `Retry-After` without a checkout of their own
 * (`SchemaMigration.ensure`).
 *
 * @since 0.1.0
 */
import type { DbSession } from "@resilience/db-session"
import { Domain } from "@resilience/domain"
import { SchemaMigration } from "@resilience/schema"
import { Effect, Layer } from "effect"
import { AppSettings } from "./Settings.ts"

/**
 * The `SchemaMigration` service for `settings.schema`, with the domain's migrations (run when `settings.migrate` is
 * set).
 *
 * @since 0.1.0
 */
export const layer: Layer.Layer<SchemaMigration.SchemaMigration, never, AppSettings | DbSession> = Layer.unwrap(
  Effect.map(Effect.service(AppSettings), (settings) =>
    SchemaMigration.layer({
      schema: settings.schema,
      components: Domain.components,
      migrate: settings.migrate
    }).pipe(Layer.orDie))
)
