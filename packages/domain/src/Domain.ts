/**
 * The product as a whole: its migrations (queue + domain, in one run) and its handler registry.
 *
 * @since 0.1.0
 */
import type { DbError, DbSession } from "@resilience/db-session"
import { Handlers, QueueSchema } from "@resilience/deriver"
import { Migrator } from "@resilience/schema"
import type { SchemaName } from "@resilience/schema"
import { Effect } from "effect"
import * as DomainSchema from "./DomainSchema.ts"
import * as Messages from "./Messages.ts"
import * as RepresentationTask from "./RepresentationTask.ts"

/**
 * The migration components, in order: the deriver's queue, then the domain.
 *
 * @since 0.1.0
 */
export const components: ReadonlyArray<Migrator.Component> = [QueueSchema.component, DomainSchema.component]

/**
 * Creates or upgrades a tenant schema: the queue tables and the domain tables, in one transaction under the
 * schema's advisory lock (safe when several instances start at once).
 *
 * @since 0.1.0
 */
export const migrate = (schema: SchemaName.SchemaName): Effect.Effect<void, DbError, DbSession> =>
  Effect.asVoid(Migrator.run(schema, components))

/**
 * The deriver's handlers for a schema: `representation` → {@link RepresentationTask.handler}.
 *
 * @since 0.1.0
 */
export const handlers = (schema: SchemaName.SchemaName): Handlers.Handlers<DbSession> =>
  Handlers.make({ [Messages.representationTask]: RepresentationTask.handler(schema) })
