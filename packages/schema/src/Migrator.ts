/**
 * Versioned, per-schema migrations: each component (the queue, the domain, …) keeps an ordered list of
 * migrations, and a migrations table in the tenant schema records which versions ran. Concurrent starts are
 * safe: the whole run happens in one transaction under a transaction-scoped advisory lock for the schema.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { Connection, DbError } from "@resilience/db-session"
import { Effect } from "effect"
import * as SchemaName from "./SchemaName.ts"

/**
 * One migration: a version (strictly increasing within its component), a name for the record, and the SQL
 * statements it runs, built for a given (validated) schema.
 *
 * @since 0.1.0
 * @category models
 */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly up: (schema: SchemaName.SchemaName) => ReadonlyArray<string>
}

/**
 * A named, ordered list of migrations (e.g. `queue`, `domain`). Components share one migrations table.
 *
 * @since 0.1.0
 * @category models
 */
export interface Component {
  readonly name: string
  readonly migrations: ReadonlyArray<Migration>
}

/**
 * A migration that ran during {@link run}.
 *
 * @since 0.1.0
 * @category models
 */
export interface Applied {
  readonly component: string
  readonly version: number
  readonly name: string
}

/**
 * The migration constructor of a component whose statements name their objects through `names` (its objects'
 * qualified names in a schema): `withNames(names)(version, name, statements)` is the migration whose statements in a
 * schema are `statements` of that schema's names.
 *
 * @since 0.3.0
 * @category constructors
 */
export const withNames = <Names>(names: (schema: SchemaName.SchemaName) => Names) =>
(
  version: number,
  name: string,
  statements: (names: Names) => ReadonlyArray<string>
): Migration => ({ version, name, up: (schema) => statements(names(schema)) })

/**
 * The name of the migrations table created in every migrated schema.
 *
 * @since 0.1.0
 * @category constants
 */
export const table = "resilience_migrations"

/** A constant first key for `pg_advisory_xact_lock(int, int)`, so our locks do not collide with others'. */
const lockNamespace = 0x5e511e

/**
 * Runs the pending migrations of the components on one connection that is already inside a transaction:
 * takes the schema's advisory lock, creates the schema and the migrations table if needed, then applies
 * what has not run yet, in order.
 *
 * @since 0.1.0
 * @category migrations
 */
export const runIn = Effect.fnUntraced(function*(
  connection: Connection,
  schema: SchemaName.SchemaName,
  components: ReadonlyArray<Component>
) {
  yield* connection.query("SELECT pg_advisory_xact_lock($1::int, hashtext($2))", [lockNamespace, schema])
  yield* connection.query(`CREATE SCHEMA IF NOT EXISTS ${SchemaName.quote(schema)}`)
  const migrations = SchemaName.qualify(schema, table)
  yield* connection.query(
    `CREATE TABLE IF NOT EXISTS ${migrations} (
      component text NOT NULL,
      version integer NOT NULL,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (component, version)
    )`
  )
  const done = yield* connection.query<{ component: string; version: number }>(
    `SELECT component, version FROM ${migrations}`
  )
  const ran = new Set(done.map((row) => `${row.component}:${row.version}`))
  const applied: Array<Applied> = []
  for (const component of components) {
    const ordered = [...component.migrations].sort((a, b) => a.version - b.version)
    for (const migration of ordered) {
      if (ran.has(`${component.name}:${migration.version}`)) continue
      for (const statement of migration.up(schema)) {
        yield* connection.query(statement)
      }
      yield* connection.query(
        `INSERT INTO ${migrations} (component, version, name) VALUES ($1, $2, $3)`,
        [component.name, migration.version, migration.name]
      )
      applied.push({ component: component.name, version: migration.version, name: migration.name })
    }
  }
  return applied as ReadonlyArray<Applied>
})

/**
 * Runs the pending migrations of the components for a schema in one transaction (one checkout): all of
 * them or none. Safe to call from many instances at once; the first one migrates, the others wait for its
 * lock and then find nothing to do.
 *
 * @since 0.1.0
 * @category migrations
 */
export const run = (
  schema: SchemaName.SchemaName,
  components: ReadonlyArray<Component>
): Effect.Effect<ReadonlyArray<Applied>, DbError, DbSession> =>
  Effect.gen(function*() {
    const session = yield* DbSession
    return yield* session.transaction((connection) => runIn(connection, schema, components))
  }).pipe(
    Effect.tap((applied) =>
      applied.length === 0
        ? Effect.void
        : Effect.logInfo("migrations applied").pipe(
          Effect.annotateLogs({ schema, migrations: applied.map((a) => `${a.component}:${a.version}`) })
        )
    ),
    Effect.withSpan("Migrator.run", { attributes: { schema } })
  )

/**
 * How many migrations of the components have not run in a schema yet (all of them when the schema or its
 * migrations table does not exist). One checkout, read only: for processes that do not migrate but wait until
 * someone has.
 *
 * @since 0.1.0
 * @category migrations
 */
export const pending = (
  schema: SchemaName.SchemaName,
  components: ReadonlyArray<Component>
): Effect.Effect<number, DbError, DbSession> =>
  Effect.gen(function*() {
    const session = yield* DbSession
    const total = components.reduce((sum, component) => sum + component.migrations.length, 0)
    return yield* session.withConnection((connection) =>
      Effect.gen(function*() {
        const exists = yield* connection.query<{ present: boolean }>(
          "SELECT to_regclass($1) IS NOT NULL AS present",
          [SchemaName.qualify(schema, table)]
        )
        if (exists[0]?.present !== true) return total
        const done = yield* connection.query<{ component: string; version: number }>(
          `SELECT component, version FROM ${SchemaName.qualify(schema, table)}`
        )
        const ran = new Set(done.map((row) => `${row.component}:${row.version}`))
        return components.reduce(
          (sum, component) =>
            sum + component.migrations.filter((migration) => !ran.has(`${component.name}:${migration.version}`)).length,
          0
        )
      })
    )
  }).pipe(Effect.withSpan("Migrator.pending", { attributes: { schema } }))

const maxDescription = 2000

/**
 * A one-line description of a failed migration run or pending check, for logs and a command's output:
 * `Tag: message` (e.g. `DatabaseUnavailable: …`), at most 2,000 characters.
 *
 * @since 0.2.0
 * @category rendering
 */
export const describeFailure = (error: DbError): string => {
  const text = `${error._tag}: ${error.message}`
  return text.length > maxDescription ? `${text.slice(0, maxDescription - 1)}…` : text
}
