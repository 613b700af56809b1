/**
 * A loopback port with nothing listening on it: connecting is refused at once (ECONNREFUSED), for the
 * `Unreachable` tests.
 */
import { Effect } from "effect"
import { createServer } from "node:net"
import { type Address, listen, urlAt } from "./CountingProxy.ts"

/** A port that was free when asked. */
export interface ClosedPort extends Address {
  /** A PostgreSQL URL that points at it. */
  readonly url: string
}

/** Binds a free loopback port, closes it again, and returns it. */
export const find: Effect.Effect<ClosedPort> = Effect.gen(function*() {
  const server = createServer()
  const port = yield* listen(server)
  yield* Effect.callback<void>((resume) => {
    server.close(() => resume(Effect.void))
  })
  const address = { host: "127.0.0.1", port }
  return { ...address, url: urlAt("postgres://postgres:unused@127.0.0.1:1/postgres", address) } satisfies ClosedPort
})
