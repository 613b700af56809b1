/**
 * A real PgBouncer (Debian's `pgbouncer` binary) in front of a test cluster, with a chosen `max_client_conn` and
 * pool size: the pooler that the saturation tests are about.
 */
import { Cluster, Orphans, Process } from "@resilience/local-postgres"
import { Data, Effect } from "effect"
import { chownSync, existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** A running PgBouncer; `url` reaches the upstream's `postgres` database through it. */
export interface PgBouncer {
  readonly host: string
  readonly port: number
  readonly url: string
  readonly pid: number
}

/** How to configure the pooler. */
export interface Options {
  readonly upstream: Cluster.Cluster
  /** Client connections PgBouncer accepts before answering "no more connections allowed (max_client_conn)". */
  readonly maxClientConn: number
  /** Server connections per database/user pair. */
  readonly poolSize: number
  /** Seconds a client may wait for a server connection before "query_wait_timeout" (PgBouncer default 120). */
  readonly queryWaitTimeout?: number
  readonly poolMode?: "session" | "transaction"
  /** Further `[pgbouncer]` settings (e.g. `admin_users` for the admin console); they override the ones above. */
  readonly settings?: Readonly<Record<string, string | number>>
}

/** The pgbouncer binary is not installed here. */
export class PgBouncerUnavailable extends Data.TaggedError("PgBouncerUnavailable")<{ readonly reason: string }> {}

const candidates = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"]

/** The binary's path, or undefined when it is not installed. */
export const binary = (): string | undefined => candidates.find((path) => existsSync(path))

/**
 * Why PgBouncer tests skip here, or undefined when they run. Under `CI=true` they never skip: a missing
 * binary there is a broken CI set-up, and the tests fail with PgBouncerUnavailable instead.
 */
export const skipReason = (): string | undefined =>
  binary() === undefined && process.env["CI"] !== "true"
    ? "pgbouncer binary not found (Debian: apt-get install pgbouncer); skipped outside CI"
    : undefined

/** Starts PgBouncer in front of `upstream`; it is stopped and its directory deleted when the scope closes. */
export const start = Effect.fnUntraced(function*(options: Options) {
  const command = binary()
  if (command === undefined) {
    return yield* new PgBouncerUnavailable({ reason: "pgbouncer binary not found (Debian: apt-get install pgbouncer)" })
  }
  const directory = Orphans.makeDirectory("pgbouncer")
  yield* Effect.addFinalizer(() => Effect.sync(() => Orphans.remove(directory)))
  const port = yield* Cluster.freePort
  const { upstream } = options
  const ini = [
    "[databases]",
    `* = host=${upstream.host} port=${upstream.port}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = plain",
    `auth_file = ${join(directory, "userlist.txt")}`,
    `pidfile = ${join(directory, "server.pid")}`,
    `pool_mode = ${options.poolMode ?? "session"}`,
    `max_client_conn = ${options.maxClientConn}`,
    `default_pool_size = ${options.poolSize}`,
    `query_wait_timeout = ${options.queryWaitTimeout ?? 120}`,
    "ignore_startup_parameters = extra_float_digits,options,statement_timeout",
    "log_connections = 0",
    "log_disconnections = 0",
    ...Object.entries(options.settings ?? {}).map(([key, value]) => `${key} = ${value}`)
  ].join("\n")
  writeFileSync(join(directory, "pgbouncer.ini"), `${ini}\n`)
  writeFileSync(join(directory, "userlist.txt"), `"${upstream.user}" "${upstream.password}"\n`)
  const account = Process.serviceAccount()
  if (account !== undefined) chownSync(directory, account.uid, account.gid)
  const child = yield* Process.start({
    server: "pgbouncer",
    command,
    args: [join(directory, "pgbouncer.ini")],
    readyWhen: "process up"
  })
  return {
    host: "127.0.0.1",
    port,
    pid: child.pid ?? 0,
    url: Cluster.urlFor({ ...upstream, host: "127.0.0.1", port }, "postgres")
  } satisfies PgBouncer
})
