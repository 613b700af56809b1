/**
 * The postgres.js driver: one single-connection `postgres()` instance per connection. postgres.js is built to
 * reconnect by itself (lazily on the next query, and again when a socket closes during startup), so each
 * instance gets a socket factory that hands out exactly one socket: any second connect fails instead of
 * knocking again. Its own pool, prepared statements and lifetime timers are switched off; the session owns
 * pooling. TLS is given as `ssl` (`false` under `disable`, postgres.js's own `prefer` under `prefer`, Node TLS
 * options otherwise) on a URL without `ssl*` parameters, which postgres.js would otherwise read itself (and send
 * the ones it does not know to the server as startup parameters).
 */
import { Effect } from "effect"
import { connect as netConnect, type Socket } from "node:net"
import postgres from "postgres"
import * as Cancel from "./Cancel.ts"
import {
  type ConnectOptions,
  type Driver,
  keepAliveInitialDelayMillis,
  noticeError,
  type RawConnection
} from "./Driver.ts"

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

/** What pg says when the server answers "N" to the SSLRequest; postgres.js would try a TLS handshake anyway. */
const noTls = (): Error => new Error("The server does not support SSL connections")

/** The first byte of the server's answer to the SSLRequest: `N`, no TLS. */
const refused = 0x4e

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

const connect = (options: ConnectOptions): Effect.Effect<RawConnection, unknown> =>
  Effect.callback<RawConnection, unknown>((resume) => {
    let socket: Socket | undefined
    let address: Cancel.Address | undefined
    let backend: Cancel.BackendKey | undefined
    let handedOut = false
    let broken = false
    /** Whether the server answered the SSLRequest with "N" (postgres.js only checks it for `prefer`). */
    let tlsRefused = false
    /** The notices of the statement running now (one at a time): postgres.js reports them before the answer. */
    let notices: Array<unknown> = []
    const { mode } = options.tls
    const destroy = () => {
      broken = true
      socket?.destroy()
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
      ssl: mode === "disable" ? false : mode === "prefer" ? "prefer" : options.tls.ssl,
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
          if (mode !== "disable") {
            // postgres.js writes the SSLRequest first; its answer is the socket's first byte
            opened.once("data", (chunk: Buffer) => {
              tlsRefused = chunk[0] === refused
            })
          }
          opened.once("close", () => {
            broken = true
          })
          return opened
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
          : Cancel.send(address, backend, timeoutMillis, tlsRefused ? undefined : options.tls.ssl),
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
        resume(Effect.fail(tlsRefused && mode !== "prefer" ? noTls() : error))
      }
    )
    return Effect.sync(destroyAll)
  })

/** postgres.js. */
export const driver: Driver = { name: "postgres", connect }
