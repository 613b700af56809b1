/**
 * Saturates a PostgreSQL server on purpose, the way the incident did: every connection slot taken, so the
 * next client is refused with 53300. The slots are held until the scope closes.
 */
import { Effect } from "effect"
import pg from "pg"

const open = (url: string) =>
  Effect.tryPromise({
    try: async () => {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
      client.on("error", () => undefined)
      await client.connect()
      return client
    },
    catch: (error) => error as Error & { readonly code?: string }
  })

/** Opens connections until the server refuses one with 53300; yields how many it holds. */
export const holdEverySlot = (url: string, limit: number) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const held: Array<pg.Client> = []
      for (let slot = 0; slot < limit; slot++) {
        const client = yield* Effect.result(open(url))
        if (client._tag === "Failure") {
          if (client.failure.code === "53300") break
          return yield* Effect.die(client.failure)
        }
        held.push(client.success)
      }
      return held
    }),
    (held) => Effect.promise(() => Promise.all(held.map((client) => client.end())))
  ).pipe(Effect.map((held) => held.length))
