/**
 * `@resilience/schema`: a tenant schema's lifecycle, for every process that serves one (an API, a queue worker,
 * a migration command): validated schema names, versioned advisory-locked migrations (run in the background by a
 * service), and the exit codes of the processes built on them.
 *
 * @since 0.1.0
 */

/**
 * Versioned, advisory-locked migrations per schema.
 *
 * @since 0.1.0
 * @category modules
 */
export * as Migrator from "./Migrator.ts"

/**
 * The exit codes of the processes built on a tenant schema: a graceful stop on SIGTERM is 0; a one-shot command's
 * 0 / 1 / 75 / 78.
 *
 * @since 0.2.0
 * @category modules
 */
export * as ProcessExit from "./ProcessExit.ts"

/**
 * A tenant schema's migration, as a service: migrations (or a check for pending ones) on a jittered schedule, in
 * the background, until the database answers; fails fast while the schema is not ready.
 *
 * @since 0.3.0
 * @category modules
 */
export * as SchemaMigration from "./SchemaMigration.ts"

/**
 * A tenant schema's migration, as a service (the former name of {@link SchemaMigration}).
 *
 * @deprecated since 0.3.0: renamed {@link SchemaMigration} (the same module under its new name; "gate" means
 * admission control in this repository); removed in the next minor release.
 * @since 0.2.0
 * @category modules
 */
export * as SchemaGate from "./SchemaMigration.ts"

/**
 * Validated, quoted schema names.
 *
 * @since 0.1.0
 * @category modules
 */
export * as SchemaName from "./SchemaName.ts"
