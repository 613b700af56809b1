/**
 * Every statement the API and the representation task send is a named text in `src/internal/statements/`: each one
 * is prepared here by a real server on a migrated schema (parsed and analysed against its tables, columns and
 * types, its parameters' types inferred), so a statement that no longer fits the schema fails by name.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { TestDatabase } from "@resilience/test-db"
import { Effect, Layer, References } from "effect"
import * as Domain from "../src/Domain.ts"
import type { Statement } from "../src/internal/Names.ts"
import * as Idempotency from "../src/internal/statements/Idempotency.ts"
import * as Messages from "../src/internal/statements/Messages.ts"
import * as QueueStatus from "../src/internal/statements/QueueStatus.ts"
import * as Representations from "../src/internal/statements/Representations.ts"
import * as RepresentationTask from "../src/internal/statements/RepresentationTask.ts"
import * as Workspaces from "../src/internal/statements/Workspaces.ts"

const Database = TestDatabase.layerWith((database) =>
  DbSession.layer({ url: database.url, connectTimeout: "2 seconds", poolClass: "queue", poolSize: 2, driver: "pg" })
).pipe(Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error")))

const modules: Record<string, Record<string, Statement>> = {
  Idempotency,
  Messages,
  QueueStatus,
  Representations,
  RepresentationTask,
  Workspaces
}

const statements = Object.entries(modules).flatMap(([module, exports]) =>
  Object.entries(exports).map(([name, statement]) => ({ name: `${module}.${name}`, statement }))
)

const schema = SchemaName.makeUnsafe("tenant_statements")

layer(Database, { excludeTestServices: true })("the domain's statements (PostgreSQL)", (it) => {
  it.effect("every statement is prepared by the server on a migrated schema", () =>
    Effect.gen(function*() {
      assert.strictEqual(statements.length, 17)
      yield* Domain.migrate(schema)
      const db = yield* DbSession
      const failed = yield* db.withConnection((connection) =>
        Effect.forEach(statements, ({ name, statement }) =>
          connection.query(`PREPARE checked AS ${statement(schema)}`).pipe(
            Effect.andThen(connection.query("DEALLOCATE checked")),
            Effect.as([]),
            Effect.catch((error) =>
              Effect.succeed([`${name}: ${error.message}`])
            )
          ))
      )
      assert.deepStrictEqual(failed.flat(), [])
    }))

  it("every statement names its objects in the schema it is made for", () => {
    const other = SchemaName.makeUnsafe("tenant_other")
    for (const { name, statement } of statements) {
      assert.include(statement(schema), "\"tenant_statements\".", name)
      assert.notInclude(statement(other), "\"tenant_statements\".", name)
    }
  })
})
