/**
 * What the deriver's benchmarks share (not a test): a fresh queue schema.
 */
import { DbSession } from "@resilience/db-session"
import { Migrator, SchemaName } from "@resilience/schema"
import { Effect } from "effect"
import * as Enqueue from "../src/Enqueue.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

/** `schema` dropped and migrated afresh, holding `items` (none by default); the session. */
export const freshQueue = (schema: SchemaName.SchemaName, items: ReadonlyArray<Enqueue.NewItem> = []) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    yield* db.query(`DROP SCHEMA IF EXISTS ${SchemaName.quote(schema)} CASCADE`)
    yield* Migrator.run(schema, [QueueSchema.component])
    if (items.length > 0) yield* db.withConnection((c) => Enqueue.enqueue(c, schema, items))
    return db
  })
