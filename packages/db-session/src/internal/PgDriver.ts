/**
 * The `pg` (node-postgres) driver: one `pg.Client` per connection. `pg.Client` never reconnects, and its own
 * default connect timeout is "wait forever", so `connectionTimeoutMillis` is always set. TLS is always given as
 * `ssl` (`false` under `disable`), so neither the URL (stripped of its `ssl*` parameters) nor `PGSSLMODE` is
 * read by pg's own rules (under which `require` verifies the certificate); `prefer` is `require` here (see
 * `Tls`).
 */
import { Effect } from "effect"
import type { ConnectionOptions } from "node:tls"
import pg from "pg"
import {
  type ConnectOptions,
  type Driver,
  keepAliveInitialDelayMillis,
  noticeError,
  type RawConnection
} from "../Driver.ts"
import * as Cancel from "./Cancel.ts"

/** The parts of `pg.Client` a cancel needs (set after the startup; not in pg's type declarations). */
interface BackendFields {
  readonly host: string
  readonly port: number
  readonly processID: number | null
  readonly secretKey: number | null
}

/** A cancel over TLS when the connection runs TLS (`ssl`: its Node TLS options; pg has no plain fallback). */
const cancel = (client: pg.Client, ssl: ConnectionOptions | undefined, timeoutMillis: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { host, port, processID, secretKey } = client as unknown as BackendFields
    return processID === null || secretKey === null
      ? Effect.void
      : Cancel.send({ host, port }, { pid: processID, secret: secretKey }, timeoutMillis, ssl)
  })

const destroy = (client: pg.Client): void => {
  client.connection.stream.destroy()
}

const wrap = (
  client: pg.Client,
  ssl: ConnectionOptions | undefined,
  isBroken: () => boolean,
  markBroken: () => void
): RawConnection => {
  // The notices of the statement running now (one at a time on a connection): pg emits them before the answer.
  let notices: Array<unknown> = []
  client.on("notice", (notice) => notices.push(notice))
  return {
    query: (sql, params) =>
      Effect.callback<ReadonlyArray<unknown>, unknown>((resume) => {
        notices = []
        client.query({ text: sql, values: [...params] }).then(
          // Several statements in one simple query (`BEGIN; SET LOCAL …`) answer with one result each.
          (result: pg.QueryResult | Array<pg.QueryResult>) => {
            const failure = noticeError(notices)
            resume(
              failure === undefined
                ? Effect.succeed(Array.isArray(result) ? result.at(-1)?.rows ?? [] : result.rows)
                : Effect.fail(failure)
            )
          },
          (error: unknown) => resume(Effect.fail(error))
        )
        return Effect.sync(() => {
          markBroken()
          destroy(client)
        })
      }),
    reusable: () => !isBroken() && client.getTransactionStatus() === "I",
    cancel: (timeoutMillis) => cancel(client, ssl, timeoutMillis),
    invalidate: markBroken,
    close: Effect.callback<void>((resume) => {
      markBroken()
      client.end().then(
        () => resume(Effect.void),
        () => resume(Effect.void)
      )
      return Effect.sync(() => destroy(client))
    }).pipe(
      Effect.timeoutOrElse({ duration: 1_000, orElse: () => Effect.sync(() => destroy(client)) })
    )
  }
}

const connect = (options: ConnectOptions): Effect.Effect<RawConnection, unknown> =>
  Effect.callback<RawConnection, unknown>((resume) => {
    const client = new pg.Client({
      connectionString: options.url,
      ssl: options.tls.ssl ?? false,
      connectionTimeoutMillis: options.timeoutMillis,
      application_name: options.applicationName,
      keepAlive: true,
      keepAliveInitialDelayMillis
    })
    let broken = false
    const markBroken = () => {
      broken = true
    }
    // Always listened to: a server that drops an idle connection must not crash the process.
    client.on("error", markBroken)
    client.on("end", markBroken)
    client.connect().then(
      () => resume(Effect.succeed(wrap(client, options.tls.ssl, () => broken, markBroken))),
      (error: unknown) => {
        markBroken()
        destroy(client)
        resume(Effect.fail(error))
      }
    )
    return Effect.sync(() => {
      markBroken()
      destroy(client)
    })
  })

/** node-postgres, the default driver. */
export const driver: Driver = { name: "pg", connect }
