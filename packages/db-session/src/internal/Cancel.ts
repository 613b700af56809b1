/**
 * The PostgreSQL CancelRequest: a separate, short connection that asks the server (or the pooler in front of
 * it) to stop the statement running on another connection, identified by its backend process id and secret
 * key. Best effort and bounded: it never fails and never waits longer than its timeout; the statement it
 * cancels fails with 57014 on its own connection.
 */
import { Effect } from "effect"
import { connect as netConnect } from "node:net"
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from "node:tls"

/** Where the server listens: a TCP host (or a Unix socket directory) and port, or a Unix socket path. */
export type Address = { readonly host: string; readonly port: number } | { readonly path: string }

/** The backend key of a connection, from its BackendKeyData message. */
export interface BackendKey {
  readonly pid: number
  readonly secret: number
}

/** The 16-byte CancelRequest message: length, the cancel request code 80877102, pid, secret. */
const message = (key: BackendKey): Buffer => {
  const buffer = Buffer.alloc(16)
  buffer.writeInt32BE(16, 0)
  buffer.writeInt32BE(80877102, 4)
  buffer.writeInt32BE(key.pid | 0, 8)
  buffer.writeInt32BE(key.secret | 0, 12)
  return buffer
}

/**
 * The 8-byte SSLRequest: length 8, the code 80877103; the first message of a connection that asks for TLS (a
 * CancelRequest's, and the postgres.js driver's).
 * @category messages
 */
export const sslRequest = (): Buffer => {
  const buffer = Buffer.alloc(8)
  buffer.writeInt32BE(8, 0)
  buffer.writeInt32BE(80877103, 4)
  return buffer
}

/**
 * Sends a CancelRequest for `key` to `address`, within `timeoutMillis`; never fails. It writes the request and
 * waits for the server to close, as libpq does: a pooler drops a cancel whose sender hangs up before it was
 * forwarded (PgBouncer takes the half-close for the client leaving, and the statement runs on). With `tls` (the
 * Node TLS options of a connection that runs TLS) the request goes over TLS, as libpq 17 sends it: an SSLRequest
 * first, the handshake on "S", then the request (plain on "N"); a TLS terminator in front of the pooler
 * (stunnel's `pgsql` protocol) closes a connection whose first message is not an SSLRequest.
 * @category effects
 */
export const send = (
  address: Address,
  key: BackendKey,
  timeoutMillis: number,
  tls?: ConnectionOptions
): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const socket = "path" in address
      ? netConnect(address.path)
      : address.host.startsWith("/")
      ? netConnect(`${address.host}/.s.PGSQL.${address.port}`)
      : netConnect({ host: address.host, port: address.port })
    let secure: TLSSocket | undefined
    let finished = false
    const close = () => {
      finished = true
      secure?.destroy()
      socket.destroy()
    }
    const done = () => {
      if (finished) return
      close()
      resume(Effect.void)
    }
    socket.setTimeout(timeoutMillis, done)
    socket.once("error", done)
    socket.once("close", done)
    socket.once("connect", () => {
      if (tls === undefined) {
        socket.write(message(key))
        // reading lets the server's close arrive (it sends nothing)
        socket.resume()
        return
      }
      socket.write(sslRequest())
      socket.once("data", (answer: Buffer) => {
        if (answer[0] !== 0x53) {
          socket.write(message(key))
          socket.resume()
          return
        }
        secure = tlsConnect({ ...tls, socket })
        secure.once("error", done)
        secure.once("close", done)
        secure.once("secureConnect", () => secure?.write(message(key)))
        // the server closes once it has read the request; reading lets the close arrive
        secure.resume()
      })
    })
    return Effect.sync(close)
  }).pipe(Effect.timeoutOrElse({ duration: timeoutMillis, orElse: () => Effect.void }))
