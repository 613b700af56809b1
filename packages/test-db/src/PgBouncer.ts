/**
 * A real PgBouncer (Debian's `pgbouncer` binary) in front of a test cluster, with a chosen `max_client_conn` and
 * pool size: the pooler that the saturation tests are about. It starts from the fleet's own configuration,
 * `deploy/pgbouncer/pgbouncer.ini` (one source for the tests, the outage lab and a deployment), and overrides only
 * addresses, paths, authentication and the sizes a test chooses.
 */
import { Cluster, Orphans, Process } from "@resilience/local-postgres"
import { Data, Effect } from "effect"
import { chownSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

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
  /** Seconds a client may wait for a server connection before "query_wait_timeout" (default: the shipped file's). */
  readonly queryWaitTimeout?: number
  /** Default: the shipped file's (`transaction`). */
  readonly poolMode?: "session" | "transaction"
  /**
   * TLS towards clients: `client_tls_sslmode` (`require`: clients without TLS are refused with "SSL required")
   * and the certificate and key it presents (PEM; written to its directory as `client_tls_cert_file` and
   * `client_tls_key_file`, readable by its account only).
   */
  readonly clientTls?: {
    readonly sslmode: "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full"
    readonly cert: string
    readonly key: string
  }
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

/**
 * The fleet's PgBouncer configuration as shipped: `deploy/pgbouncer/pgbouncer.ini` at the repository's root.
 */
export const shippedIni: string = fileURLToPath(new URL("../../../deploy/pgbouncer/pgbouncer.ini", import.meta.url))

/** One `[section]` of an ini file: its `key = value` settings in file order (comments dropped). */
export type Ini = ReadonlyMap<string, ReadonlyMap<string, string>>

/** Parses PgBouncer's ini format: `[section]`, `key = value`, `;` and `#` comments. */
export const parseIni = (text: string): Ini => {
  const sections = new Map<string, Map<string, string>>()
  let current: Map<string, string> | undefined
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith(";") || line.startsWith("#")) continue
    const header = /^\[(.+)\]$/.exec(line)
    if (header !== null) {
      current = new Map()
      sections.set(header[1]!, current)
      continue
    }
    const equals = line.indexOf("=")
    if (current === undefined || equals < 0) continue
    current.set(line.slice(0, equals).trim(), line.slice(equals + 1).trim())
  }
  return sections
}

/** Writes sections back in PgBouncer's format. */
export const renderIni = (ini: Ini): string =>
  [...ini].flatMap(([name, settings]) => [`[${name}]`, ...[...settings].map(([k, v]) => `${k} = ${v}`)]).join("\n")
  + "\n"

/** The shipped file with `[databases]` replaced and `overrides` applied over its `[pgbouncer]` settings. */
export const configure = (
  databases: Readonly<Record<string, string>>,
  overrides: Readonly<Record<string, string | number>>
): string => {
  const shipped = parseIni(readFileSync(shippedIni, "utf8"))
  const pgbouncer = new Map(shipped.get("pgbouncer"))
  for (const [key, value] of Object.entries(overrides)) pgbouncer.set(key, String(value))
  return renderIni(new Map([["databases", new Map(Object.entries(databases))], ["pgbouncer", pgbouncer]]))
}

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
  const account = Process.serviceAccount()
  const secret = (name: string, text: string) => {
    const path = join(directory, name)
    writeFileSync(path, text, { mode: 0o600 })
    if (account !== undefined) chownSync(path, account.uid, account.gid)
    return path
  }
  const clientTls = options.clientTls === undefined ? {} : {
    client_tls_sslmode: options.clientTls.sslmode,
    client_tls_cert_file: secret("client-tls.crt", options.clientTls.cert),
    client_tls_key_file: secret("client-tls.key", options.clientTls.key)
  }
  const ini = configure({ "*": `host=${upstream.host} port=${upstream.port}` }, {
    listen_addr: "127.0.0.1",
    listen_port: port,
    auth_type: "plain",
    auth_file: join(directory, "userlist.txt"),
    pidfile: join(directory, "server.pid"),
    max_client_conn: options.maxClientConn,
    default_pool_size: options.poolSize,
    max_db_connections: options.poolSize,
    ...(options.poolMode === undefined ? {} : { pool_mode: options.poolMode }),
    ...(options.queryWaitTimeout === undefined ? {} : { query_wait_timeout: options.queryWaitTimeout }),
    ...clientTls,
    ...options.settings
  })
  writeFileSync(join(directory, "pgbouncer.ini"), ini)
  writeFileSync(join(directory, "userlist.txt"), `"${upstream.user}" "${upstream.password}"\n`)
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
