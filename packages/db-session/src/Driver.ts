/**
 * The seam between the session and a client library: one physical connection, opened by exactly one
 * attempt, that runs statements and can be closed. `pg` and postgres.js each implement it.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import * as Classify from "./Classify.ts"
import type { Settings as TlsSettings } from "./Tls.ts"

/**
 * TCP keepalive on every connection: the first probe after this long without traffic, so a peer that died
 * without closing (a failed-over host, a dropped NAT entry) is noticed by the operating system.
 *
 * @since 0.2.0
 * @category constants
 */
export const keepAliveInitialDelayMillis = 10_000

/**
 * What a statement fails with when a notice that came with its answer stands for a failure
 * (`Classify.noticeFailure`: the server's warning that a commit may not be on the synchronous standby); each
 * driver collects the notices of a statement and asks this before it hands the rows over. `undefined` when no
 * notice does.
 *
 * @since 0.3.0
 * @category decisions
 */
export const noticeError = (notices: ReadonlyArray<unknown>): Error | undefined => {
  for (const notice of notices) {
    const failure = Classify.noticeFailure(notice)
    if (failure !== undefined) return Object.assign(new Error(failure.message), { code: failure.code })
  }
  return undefined
}

/**
 * Which client library opens the connections.
 *
 * @since 0.1.0
 * @category models
 */
export type DriverName = "pg" | "postgres"

/**
 * How to open one connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConnectOptions {
  /** The connection URL, without `ssl*` parameters (TLS comes as `tls`). */
  readonly url: string
  /** The resolved `sslmode` and the Node TLS options of the handshake (`Tls.resolve`), the same for both drivers. */
  readonly tls: Pick<TlsSettings, "mode" | "ssl">
  /** Bound on the attempt; also handed to the driver's own timer, so a stalled socket is closed either way. */
  readonly timeoutMillis: number
  readonly applicationName: string
}

/**
 * One open connection. Its errors are the driver's own; the session classifies them.
 *
 * @since 0.1.0
 * @category models
 */
export interface RawConnection {
  /**
   * Runs one statement (`$1`, `$2` placeholders). Interrupting it destroys the connection: a statement that
   * may still be running on the server is never handed to the next user. A statement whose answer came with
   * a notice that stands for a failure ({@link noticeError}) fails with it.
   */
  readonly query: (sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, unknown>
  /** Whether the connection can be handed to another checkout: still open, not broken, no transaction open. */
  readonly reusable: () => boolean
  /** Marks the connection as not reusable: it is closed when its checkout ends. */
  readonly invalidate: () => void
  /**
   * Asks the server to stop the statement running on this connection (a CancelRequest on a separate short
   * connection), within `timeoutMillis`; best effort, never fails.
   */
  readonly cancel: (timeoutMillis: number) => Effect.Effect<void>
  /** Closes the connection politely, bounded; never fails. */
  readonly close: Effect.Effect<void>
}

/**
 * A client library behind the session.
 *
 * @since 0.1.0
 * @category models
 */
export interface Driver {
  readonly name: DriverName
  /**
   * Exactly one connection attempt (one TCP connect, one startup); fails with the driver's error. Interrupting
   * it destroys the half-open socket.
   */
  readonly connect: (options: ConnectOptions) => Effect.Effect<RawConnection, unknown>
}
