/**
 * A loopback TCP server that plays a database for the network tests: it counts the connections it accepts
 * and hands each socket to a behaviour (say nothing, answer with an error, …). It and every socket it
 * accepted close with the scope.
 */
import { Effect, type Scope } from "effect"
import { createServer, type Socket } from "node:net"
import { type Address, listen, shutdown, urlAt } from "./CountingProxy.ts"

/** A running fake server. */
export interface FakeServer extends Address {
  /** Connections accepted so far. */
  readonly accepted: Effect.Effect<number>
  /** A PostgreSQL URL that points at it. */
  readonly url: string
}

/** Starts a fake server on a free loopback port; `onConnection` decides what each client hears. */
export const start = (onConnection: (socket: Socket) => void): Effect.Effect<FakeServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    let accepted = 0
    const sockets = new Set<Socket>()
    const server = createServer((socket) => {
      accepted += 1
      sockets.add(socket)
      socket.on("error", () => socket.destroy())
      socket.on("close", () => sockets.delete(socket))
      onConnection(socket)
    })
    const port = yield* Effect.acquireRelease(listen(server), () => shutdown(server, sockets))
    const address = { host: "127.0.0.1", port }
    return {
      ...address,
      accepted: Effect.sync(() => accepted),
      url: urlAt("postgres://postgres:unused@127.0.0.1:1/postgres", address)
    } satisfies FakeServer
  })
