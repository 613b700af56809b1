/**
 * A TCP listener that accepts connections and never says a word: the server that hangs during startup, for
 * the connect-timeout tests.
 */
import { Effect, type Scope } from "effect"
import { createServer, type Socket } from "node:net"
import { type Address, listen, shutdown, urlAt } from "./CountingProxy.ts"

/** A running silent listener. */
export interface SilentListener extends Address {
  /** Connections accepted so far. */
  readonly accepted: Effect.Effect<number>
  /** A PostgreSQL URL that points at the listener. */
  readonly url: string
}

/** Starts a silent listener on a free loopback port; it and every accepted socket close with the scope. */
export const start: Effect.Effect<SilentListener, never, Scope.Scope> = Effect.gen(function*() {
  let accepted = 0
  const sockets = new Set<Socket>()
  const server = createServer((socket) => {
    accepted += 1
    sockets.add(socket)
    socket.on("error", () => socket.destroy())
    socket.on("close", () => sockets.delete(socket))
  })
  const port = yield* Effect.acquireRelease(listen(server), () => shutdown(server, sockets))
  const address = { host: "127.0.0.1", port }
  return {
    ...address,
    accepted: Effect.sync(() => accepted),
    url: urlAt("postgres://postgres:unused@127.0.0.1:1/postgres", address)
  } satisfies SilentListener
})
