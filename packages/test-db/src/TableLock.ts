/**
 * A lock another session holds: opens its own connection, takes `ACCESS EXCLUSIVE` on a table inside an open
 * transaction and keeps it until the scope closes, so statements that touch the table hang as they would
 * behind a stuck migration or a long transaction.
 */
import { Effect, type Scope } from "effect"
import pg from "pg"

/** Holds an exclusive lock on `table` (a qualified, quoted name as SQL wants it) until the scope closes. */
export const hold = (url: string, table: string): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query("BEGIN")
      await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`)
      return client
    }),
    (client) => Effect.promise(() => client.query("ROLLBACK").finally(() => client.end()))
  ))
