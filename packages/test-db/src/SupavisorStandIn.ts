/**
 * A minimal PostgreSQL wire-protocol responder that answers every startup with the ErrorResponse Supavisor
 * sends when its client limit is reached (FATAL, XX000, "(EMAXCONN) max client connections reached, limit: 3")
 * and closes the connection. Supavisor itself cannot run here; its exact bytes can.
 */
import type { Effect, Scope } from "effect"
import type { Socket } from "node:net"
import * as FakeServer from "./FakeServer.ts"

/** Supavisor's message when the tenant's client limit is reached. */
export const emaxconn = (limit: number): string => `(EMAXCONN) max client connections reached, limit: ${limit}`

/** How the stand-in answers. */
export interface Options {
  /** SQLSTATE; Supavisor uses XX000. */
  readonly code?: string
  /** Default: {@link emaxconn} with limit 3. */
  readonly message?: string
}

/** A running stand-in. */
export type SupavisorStandIn = FakeServer.FakeServer

const SSL_REQUEST = 80877103
const GSSENC_REQUEST = 80877104
const CANCEL_REQUEST = 80877102

/** The ErrorResponse message: 'E', length, then S, V, C, M fields, each NUL-terminated, and a final NUL. */
export const errorResponse = (code: string, message: string): Buffer => {
  const field = (type: string, value: string) =>
    Buffer.concat([Buffer.from(type), Buffer.from(value), Buffer.from([0])])
  const body = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", code),
    field("M", message),
    Buffer.from([0])
  ])
  const header = Buffer.alloc(5)
  header.write("E", 0)
  header.writeInt32BE(body.length + 4, 1)
  return Buffer.concat([header, body])
}

const answer = (socket: Socket, reply: Buffer) => {
  let buffered = Buffer.alloc(0)
  socket.on("data", (chunk) => {
    buffered = Buffer.concat([buffered, chunk])
    while (buffered.length >= 8) {
      const length = buffered.readInt32BE(0)
      if (buffered.length < length) return
      const code = buffered.readInt32BE(4)
      buffered = buffered.subarray(length)
      if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
        socket.write("N")
      } else if (code === CANCEL_REQUEST) {
        socket.end()
        return
      } else {
        socket.end(reply)
        return
      }
    }
  })
}

/** Starts the stand-in on a free loopback port; it and its sockets close with the scope. */
export const start = (options: Options = {}): Effect.Effect<SupavisorStandIn, never, Scope.Scope> => {
  const reply = errorResponse(options.code ?? "XX000", options.message ?? emaxconn(3))
  return FakeServer.start((socket) => answer(socket, reply))
}
