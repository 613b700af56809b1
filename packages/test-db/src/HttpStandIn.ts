/**
 * A loopback HTTP server on a free port, standing in for an HTTP peer in tests (a collector that keeps what it
 * receives, a proxy that records what passes). It and its connections close with the scope.
 */
import { Effect, type Scope } from "effect"
import { createServer, type RequestListener } from "node:http"
import type { AddressInfo } from "node:net"

/** Serves `handler` on 127.0.0.1 and a free port; yields its base URL (`http://127.0.0.1:<port>`). */
export const serve = (handler: RequestListener): Effect.Effect<{ readonly url: string }, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.callback<{ readonly url: string; readonly close: () => void }>((resume) => {
      const server = createServer(handler)
      server.keepAliveTimeout = 1_000
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as AddressInfo
        resume(Effect.succeed({
          url: `http://127.0.0.1:${port}`,
          close: () => {
            server.closeAllConnections()
            server.close()
          }
        }))
      })
    }),
    (served) => Effect.sync(served.close)
  ).pipe(Effect.map(({ url }) => ({ url })))
