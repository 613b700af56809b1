/**
 * Shared pieces of the app's PostgreSQL suites.
 */
import { Domain, Workspaces } from "@resilience/domain"
import { SchemaName } from "@resilience/schema"
import { Effect } from "effect"

/** The tenant schema `name`, migrated, with its workspace `acme`. */
export const tenant = (name: string) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(name)
    yield* Domain.migrate(schema)
    yield* Workspaces.create(schema, "acme")
    return schema
  })
