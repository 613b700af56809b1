/**
 * The postgres.js driver: one single-connection `postgres()` instance per connection. postgres.js is built to
 * reconnect by itself (lazily on the next query, and again when a socket closes during startup), so each
 * instance gets a socket factory that hands out exactly one socket: any second connect fails instead of
 * knocking again. Its own pool, prepared statements and lifetime timers are switched off; the session owns
 * pooling. TLS is negotiated in the socket factory (the SSLRequest, then the handshake with the Node TLS options
 * `Tls.resolve` gave), and postgres.js is handed the TLS socket with its own `ssl` off: the socket postgres.js
 * writes to is then the one this driver destroys. (Left to postgres.js, the TLS socket wraps the factory's TCP
 * socket; destroying that one left the TLS socket open on a closed descriptor, and postgres.js's goodbye on it
 * threw an uncaught `write EBADF` that ends the process.) The URL has no `ssl*` parameters, which postgres.js
 * would otherwise read itself (and send the ones it does not know to the server as startup parameters).
 */
import { Effect } from "effect"
import { connect as netConnect, isIP, type Socket } from "node:net"
import { connect as tlsConnect, type ConnectionOptions } from "node:tls"
import postgres from "postgres"
import {
  type ConnectOptions,
  type Driver,
  keepAliveInitialDelayMillis,
  noticeError,
  type RawConnection
} from "../Driver.ts"
import * as Cancel from "./Cancel.ts"

/** The error postgres.js receives when it tries to open a second socket for the same connection. */
const secondSocket = (): Error =>
  Object.assign(new Error("connection closed by the server during startup (single attempt: no reconnect)"), {
    code: "CONNECTION_CLOSED"
  })

interface SocketOptions {
  readonly host: ReadonlyArray<string>
  readonly port: ReadonlyArray<number>
  readonly path?: string | false
}

/** What pg says when the server answers "N" to the SSLRequest. */
const noTls = (): Error => new Error("The server does not support SSL connections")

const ignore = (): void => undefined

/** The first byte of the server's answer to the SSLRequest: `S`, TLS follows. */
const accepted = 0x53

const openSocket = (options: SocketOptions): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const socket = options.path
      ? netConnect(options.path)
      : netConnect({ host: options.host[0] ?? "localhost", port: options.port[0] ?? 5432 })
    socket.setNoDelay(true)
    socket.setKeepAlive(true, keepAliveInitialDelayMillis)
    socket.once("error", reject)
    socket.once("connect", () => {
      socket.removeListener("error", reject)
      resolve(socket)
    })
  })

/** The server's one-byte answer to the SSLRequest written on `socket`. */
const answerTo = (socket: Socket): Promise<number> =>
  new Promise((resolve, reject) => {
    const fail = (error: unknown) => {
      socket.removeListener("data", answer)
      reject(error)
    }
    const answer = (chunk: Buffer) => {
      socket.removeListener("error", fail)
      socket.removeListener("close", closed)
      socket.pause()
      resolve(chunk[0] ?? 0)
    }
    const closed = () => fail(secondSocket())
    socket.once("error", fail)
    socket.once("close", closed)
    socket.once("data", answer)
    socket.write(Cancel.sslRequest())
  })

/** The TLS handshake over `socket`, with SNI for a host name as libpq sends it (never for an address). */
const handshake = (socket: Socket, host: string | undefined, ssl: ConnectionOptions): Promise<Socket> =>
  new Promise((resolve, reject) => {
    const servername = host !== undefined && !host.startsWith("/") && isIP(host) === 0 ? host : undefined
    const secure = tlsConnect({ ...(servername === undefined ? {} : { servername }), ...ssl, socket })
    secure.once("error", reject)
    secure.once("secureConnect", () => {
      secure.removeListener("error", reject)
      resolve(secure)
    })
  })

const connect = (options: ConnectOptions): Effect.Effect<RawConnection, unknown> =>
  Effect.callback<RawConnection, unknown>((resume) => {
    /** The TCP socket, and the TLS socket over it when the connection runs TLS (the one postgres.js holds). */
    let socket: Socket | undefined
    let secure: Socket | undefined
    let address: Cancel.Address | undefined
    let backend: Cancel.BackendKey | undefined
    let handedOut = false
    let broken = false
    /** The notices of the statement running now (one at a time): postgres.js reports them before the answer. */
    let notices: Array<unknown> = []
    const { mode } = options.tls
    const destroy = () => {
      broken = true
      // the TLS socket first: destroyed, it is no longer "open" to postgres.js, which then writes nothing on it
      secure?.destroy()
      socket?.destroy()
    }
    /** The SSLRequest and, on "S", the handshake; on "N" the plain socket under `prefer`, a failure otherwise. */
    const negotiate = async (opened: Socket, host: string | undefined): Promise<Socket> => {
      if (mode === "disable") return opened
      const answer = await answerTo(opened)
      if (answer !== accepted) {
        if (mode === "prefer") return opened
        throw noTls()
      }
      if (broken) throw secondSocket()
      secure = await handshake(opened, host, options.tls.ssl ?? {})
      return secure
    }
    const settings = {
      max: 1,
      connect_timeout: options.timeoutMillis / 1000,
      idle_timeout: 0,
      max_lifetime: null,
      prepare: false,
      // JSON parameters as pg sends them: a string is already JSON, anything else is stringified.
      types: {
        json: {
          to: 114,
          from: [114, 3802],
          serialize: (value: unknown) => typeof value === "string" ? value : JSON.stringify(value),
          parse: (value: string) => JSON.parse(value)
        }
      },
      onnotice: (notice: unknown) => {
        notices.push(notice)
      },
      onclose: () => {
        broken = true
      },
      connection: { application_name: options.applicationName },
      // TLS is negotiated in `socket` below; postgres.js is handed the socket to speak the protocol on
      ssl: false,
      socket: (socketOptions: SocketOptions): Promise<Socket> => {
        if (handedOut) return Promise.reject(secondSocket())
        handedOut = true
        address = socketOptions.path
          ? { path: socketOptions.path }
          : { host: socketOptions.host[0] ?? "localhost", port: socketOptions.port[0] ?? 5432 }
        return openSocket(socketOptions).then((opened) => {
          if (broken) {
            // The attempt was interrupted while the TCP connect was in flight.
            opened.destroy()
            throw secondSocket()
          }
          socket = opened
          // its failures reach the attempt as its close, the SSLRequest's answer, the handshake's failure or
          // postgres.js's own listener; none may end the process as an unhandled "error" event
          opened.on("error", ignore)
          opened.once("close", () => {
            broken = true
          })
          return negotiate(opened, socketOptions.path ? undefined : socketOptions.host[0]).then((ready) => {
            if (broken) {
              // interrupted during the handshake
              destroy()
              throw secondSocket()
            }
            ready.on("error", ignore)
            ready.once("close", () => {
              broken = true
            })
            return ready
          }, (error: unknown) => {
            destroy()
            throw error
          })
        })
      }
    }
    const sql = postgres(options.url, settings as postgres.Options<{}>)
    const destroyAll = () => {
      destroy()
      sql.end({ timeout: 0 }).catch(() => undefined)
    }
    const raw: RawConnection = {
      query: (text, params) =>
        Effect.callback<ReadonlyArray<unknown>, unknown>((resumeQuery) => {
          if (broken) {
            resumeQuery(Effect.fail(secondSocket()))
            return
          }
          notices = []
          sql.unsafe(text, [...params] as Array<postgres.ParameterOrJSON<never>>).then(
            (rows) => {
              const failure = noticeError(notices)
              resumeQuery(failure === undefined ? Effect.succeed([...rows]) : Effect.fail(failure))
            },
            (error: unknown) => resumeQuery(Effect.fail(error))
          )
          return Effect.sync(destroyAll)
        }),
      reusable: () => !broken,
      cancel: (timeoutMillis) =>
        address === undefined || backend === undefined
          ? Effect.void
          // over TLS when the connection runs TLS (not under `prefer` when the server answered "N")
          : Cancel.send(address, backend, timeoutMillis, secure === undefined ? undefined : options.tls.ssl),
      invalidate: () => {
        broken = true
      },
      close: Effect.callback<void>((resumeClose) => {
        broken = true
        sql.end({ timeout: 0 }).then(
          () => resumeClose(Effect.void),
          () => resumeClose(Effect.void)
        )
        return Effect.sync(destroy)
      }).pipe(
        Effect.timeoutOrElse({ duration: 1_000, orElse: () => Effect.sync(destroy) }),
        Effect.ensuring(Effect.sync(destroy))
      )
    }
    // postgres.js connects lazily: the first statement opens the connection (and ends the attempt).
    sql.unsafe("select 1").then(
      (rows) => {
        // postgres.js hangs the connection's BackendKeyData on each result as `state`.
        const state = (rows as unknown as { readonly state?: { pid: number | null; secret: number | null } }).state
        if (typeof state?.pid === "number" && typeof state.secret === "number") {
          backend = { pid: state.pid, secret: state.secret }
        }
        resume(Effect.succeed(raw))
      },
      (error: unknown) => {
        destroyAll()
        resume(Effect.fail(error))
      }
    )
    return Effect.sync(destroyAll)
  })

/** postgres.js. */
export const driver: Driver = { name: "postgres", connect }
