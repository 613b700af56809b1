/**
 * The PostgreSQL CancelRequest: a separate, short connection that asks the server (or the pooler in front of
 * it) to stop the statement running on another connection, identified by its backend process id and secret
 * key. Best effort and bounded: it never fails and never waits longer than its timeout; the statement it
 * cancels fails with 57014 on its own connection.
 */
import { Effect } from "effect"
import { connect as netConnect } from "node:net"

/** Where the server listens: a TCP host (or a Unix socket directory) and port, or a Unix socket path. */
export type Address = { readonly host: string; readonly port: number } | { readonly path: string }

/** The backend key of a connection, from its BackendKeyData message. */
export interface BackendKey {
  readonly pid: number
  readonly secret: number
}

/** The 16-byte CancelRequest message: length, the cancel request code 80877102, pid, secret. */
export const message = (key: BackendKey): Buffer => {
  const buffer = Buffer.alloc(16)
  buffer.writeInt32BE(16, 0)
  buffer.writeInt32BE(80877102, 4)
  buffer.writeInt32BE(key.pid | 0, 8)
  buffer.writeInt32BE(key.secret | 0, 12)
  return buffer
}

/** Sends a CancelRequest for `key` to `address`, within `timeoutMillis`; never fails. */
export const send = (address: Address, key: BackendKey, timeoutMillis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const socket = "path" in address
      ? netConnect(address.path)
      : address.host.startsWith("/")
      ? netConnect(`${address.host}/.s.PGSQL.${address.port}`)
      : netConnect({ host: address.host, port: address.port })
    const done = () => {
      socket.destroy()
      resume(Effect.void)
    }
    socket.setTimeout(timeoutMillis, done)
    socket.once("error", done)
    socket.once("close", done)
    socket.once("connect", () => socket.end(message(key)))
    return Effect.sync(() => socket.destroy())
  }).pipe(Effect.timeoutOrElse({ duration: timeoutMillis, orElse: () => Effect.void }))
