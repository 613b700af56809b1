/**
 * A TCP proxy in front of a server that counts the client connections it accepts: every one is a connection
 * attempt, so "exactly one per checkout" is a number a test can assert (the regression guard against retry).
 */
import { Effect, type Scope } from "effect"
import { connect as netConnect, createServer, type Server, type Socket } from "node:net"

/** Where something listens. */
export interface Address {
  readonly host: string
  readonly port: number
}

/** A running proxy. */
export interface CountingProxy extends Address {
  /** Client connections accepted so far (attempts, successful or not). */
  readonly attempts: Effect.Effect<number>
  /** Client connections currently open through the proxy. */
  readonly open: Effect.Effect<number>
  /** `url` with its host and port replaced by the proxy's. */
  readonly url: (url: string) => string
  /**
   * A network partition between the clients and the server while `cut` is true: every open connection is
   * dropped and new ones are closed at once (still counted); `false` heals it.
   */
  readonly setCut: (cut: boolean) => Effect.Effect<void>
  /**
   * A pooler that stops answering while `silent` is true: connections stay open, nothing is forwarded either
   * way (new ones are accepted and stay silent too); `false` resumes forwarding.
   */
  readonly setSilent: (silent: boolean) => Effect.Effect<void>
}

/** `url` with its host and port replaced by `address`. */
export const urlAt = (url: string, address: Address): string => {
  const parsed = new URL(url)
  parsed.hostname = address.host
  parsed.port = String(address.port)
  return parsed.toString()
}

/**
 * Listens on a loopback port (a free one by default); resolves with the bound port. A port that is taken is a
 * defect of the test that asked for it: it dies.
 */
export const listen = (server: Server, port = 0): Effect.Effect<number> =>
  Effect.callback<number>((resume) => {
    server.once("error", (error) => resume(Effect.die(error)))
    server.listen(port, "127.0.0.1", () => {
      const address = server.address()
      resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Closes the server and destroys every socket it accepted. */
export const shutdown = (server: Server, sockets: Set<Socket>): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    for (const socket of sockets) socket.destroy()
    sockets.clear()
    server.close(() => resume(Effect.void))
  })

/**
 * Starts a proxy to `target`, on a free loopback port or on `options.port` (the address an app already uses,
 * where the server "comes back"). A client whose upstream connection fails (nothing listening) is closed, just
 * as a pooler that cannot reach its server would; every accepted client counts. Stopped when the scope closes.
 */
export const start = (
  target: Address,
  options: { readonly port?: number } = {}
): Effect.Effect<CountingProxy, never, Scope.Scope> =>
  Effect.gen(function*() {
    let attempts = 0
    const sockets = new Set<Socket>()
    const clients = new Set<Socket>()
    let cut = false
    let silent = false
    const server = createServer((client) => {
      attempts += 1
      if (cut) {
        client.destroy()
        return
      }
      clients.add(client)
      const upstream = netConnect({ host: target.host, port: target.port })
      sockets.add(client)
      sockets.add(upstream)
      const closeBoth = () => {
        client.destroy()
        upstream.destroy()
        sockets.delete(client)
        sockets.delete(upstream)
        clients.delete(client)
      }
      client.on("error", closeBoth)
      upstream.on("error", closeBoth)
      client.on("close", closeBoth)
      upstream.on("close", closeBoth)
      client.pipe(upstream)
      upstream.pipe(client)
      if (silent) {
        client.pause()
        upstream.pause()
      }
    })
    const port = yield* Effect.acquireRelease(listen(server, options.port), () => shutdown(server, sockets))
    const address = { host: "127.0.0.1", port }
    return {
      ...address,
      attempts: Effect.sync(() => attempts),
      open: Effect.sync(() => clients.size),
      url: (url: string) => urlAt(url, address),
      setCut: (value: boolean) =>
        Effect.sync(() => {
          cut = value
          if (value) {
            for (const socket of sockets) socket.destroy()
            sockets.clear()
            clients.clear()
          }
        }),
      setSilent: (value: boolean) =>
        Effect.sync(() => {
          silent = value
          for (const socket of sockets) {
            if (value) socket.pause()
            else socket.resume()
          }
        })
    } satisfies CountingProxy
  })
