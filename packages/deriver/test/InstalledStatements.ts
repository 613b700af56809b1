/**
 * The statements inside the queue's functions, read from the text of the latest migration that creates each one:
 * what `EXPLAIN` needs to see the plans a function keeps (tests and benches). The texts are not rebuilt here: a
 * change to a migration shows up in every plan read through this.
 */
import { SchemaName } from "@resilience/schema"
import * as QueueSchema from "../src/QueueSchema.ts"

/** The text of the latest migration statement that creates `signature` (e.g. `queue_claim(integer, text, integer, float8, bigint)`). */
export const functionText = (schema: SchemaName.SchemaName, signature: string): string => {
  const [name, args] = signature.split("(")
  const qualified = `${SchemaName.qualify(schema, name!)}(${args}`
  const texts = QueueSchema.migrations.flatMap((migration) => migration.up(schema))
  const found = texts.filter((text) => /^CREATE (OR REPLACE )?FUNCTION /.test(text) && text.includes(qualified))
    .filter((text) => text.slice(0, text.indexOf(")") + 1).endsWith(qualified))
  const last = found.at(-1)
  if (last === undefined) throw new Error(`no migration creates ${signature}`)
  return last
}

/** A function's `RETURN QUERY` statements in order, and its `IF` test when it has one. */
const parts = (text: string) => ({
  statements: [...text.matchAll(/RETURN QUERY\s+([\s\S]*?);\s*(?:ELSE|END)/g)].map((match) => match[1]!),
  test: /\bIF\s+([\s\S]*?)\s+THEN\b/.exec(text)?.[1]
})

/**
 * `queue_claim(limit, owner, batch size, now, after)`: `due`, its statement when a timed item is due (both walks);
 * `ready`, when none is (the walk of untimed items only); `dueTest`, the test between them (an SQL expression).
 */
export const claimStatements = (schema: SchemaName.SchemaName) => {
  const { statements, test } = parts(functionText(schema, "queue_claim(integer, text, integer, float8, bigint)"))
  return { due: statements[0]!, ready: statements[1]!, dueTest: test! }
}

/**
 * The record's statement as release 0.2.0 ran it (`queue_record` of migration 7, one statement: the ownership row's
 * heartbeat or release with the marks): what the bench's plain-statement modes send. The later functions record in
 * three statements (the ownership row locked, the marks, then the heartbeat or release) and have no single one.
 */
export const releasedRecordStatement = (schema: SchemaName.SchemaName): string => {
  const texts = QueueSchema.migrations.find((migration) => migration.version === 7)!.up(schema)
  const record = texts.find((text) => text.includes(`${SchemaName.qualify(schema, "queue_record")}(`))
  if (record === undefined) throw new Error("migration 7 creates no queue_record")
  return parts(record).statements[0]!
}
