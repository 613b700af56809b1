/**
 * The real parts: a throw-away PostgreSQL (embedded binaries, a chosen `max_connections`) and Debian's
 * PgBouncer in front of it in transaction mode (a chosen `max_client_conn` and `default_pool_size`), with
 * its admin console open to the lab. Both stop, and their directories are deleted, when the scope closes;
 * both die with the lab's process even if it is killed (local-postgres's `setpriv --pdeathsig` and orphan reaping).
 */
import { Cluster, Orphans, Process } from "@resilience/local-postgres"
import { Certificates, PgBouncer } from "@resilience/test-db"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import { chownSync, existsSync, readFileSync, writeFileSync } from "node:fs"
import { connect } from "node:net"
import { join } from "node:path"
import pg from "pg"
import type { Auth, Settings } from "./Settings.ts"

/** The running parts. */
export interface Parts {
  readonly cluster: Cluster.Cluster
  readonly bouncer: PgBouncer.PgBouncer
  /** Through the pooler, to the `postgres` database. */
  readonly url: string
  /** PgBouncer's admin console (`SHOW POOLS`, `SHOW STATS`). */
  readonly adminUrl: string
  /** The pooler's processes (PgBouncer, and stunnel in front of it): their CPU time is the pooler's. */
  readonly poolerPids: ReadonlyArray<number>
}

/**
 * PgBouncer's settings for an auth method. For `scram-verifier` the auth file holds the superuser's SCRAM
 * verifier read from `pg_authid` (written to a directory of its own, deleted with the scope).
 */
export const authSettings = (cluster: Cluster.Cluster, auth: Auth) =>
  Effect.gen(function*() {
    if (auth !== "scram-verifier") return { auth_type: auth }
    const directory = yield* Effect.acquireRelease(
      Effect.sync(() => Orphans.makeDirectory("lab-auth")),
      (d) => Effect.sync(() => Orphans.remove(d))
    )
    const direct = yield* client(cluster.url, "lab-auth")
    const verifier = yield* Effect.tryPromise({
      try: () => direct.query<{ v: string }>("SELECT rolpassword AS v FROM pg_authid WHERE rolname = current_user"),
      catch: (cause) => new Error(`cannot read the SCRAM verifier: ${String(cause)}`)
    })
    const file = join(directory, "userlist.txt")
    writeFileSync(file, `"${cluster.user}" "${verifier.rows[0]?.v ?? ""}"\n`, { mode: 0o644 })
    return { auth_type: "scram-sha-256", auth_file: file }
  })

/** What a pooler is built of: PgBouncer's limits and auth, and the TLS in front of its clients. */
export type PoolerSettings = Pick<
  Settings,
  "maxClientConn" | "poolSize" | "queryWaitTimeoutSeconds" | "auth" | "tls" | "tlsKey" | "poolerCpu"
>

/** What to install when stunnel is missing. */
const stunnelMissing = "stunnel not found (Debian: apt-get install stunnel4)"

/**
 * stunnel's binary (Debian's `stunnel4`), or undefined when it is not installed.
 */
export const stunnelBinary = (): string | undefined =>
  ["/usr/bin/stunnel4", "/usr/bin/stunnel"].find((path) => existsSync(path))

/**
 * Why a run with stunnel in front skips here, or undefined when it runs. Under `CI=true` it never skips: a
 * missing binary there is a broken CI set-up (`.ci/run` installs `stunnel4`), and the run fails instead.
 */
export const stunnelSkipReason = (): string | undefined =>
  stunnelBinary() === undefined && process.env["CI"] !== "true"
    ? `${stunnelMissing}; skipped outside CI`
    : undefined

/** A pooler: PgBouncer, and stunnel when it terminates TLS. */
export interface Pooler {
  readonly bouncer: PgBouncer.PgBouncer
  /** What clients connect to (with `sslmode=require` under TLS): stunnel's port, or PgBouncer's. */
  readonly url: string
  /** PgBouncer's admin console, straight to PgBouncer (with `sslmode=require` when PgBouncer runs TLS). */
  readonly adminUrl: string
  /** The pooler's processes, whose CPU time is the pooler's: PgBouncer, and stunnel when there is one. */
  readonly pids: ReadonlyArray<number>
}

const withSslmode = (url: string, tls: boolean) => tls ? `${url}?sslmode=require` : url

/** The port of a `postgres://…@host:port/db` URL replaced. */
const withPort = (url: string, port: number) => url.replace(/@([^:/]+):\d+\//, `@$1:${port}/`)

/** Pins every thread of each process to one CPU (`taskset`); threads created later inherit it. */
const pin = (pids: ReadonlyArray<number>, cpu: number) =>
  Effect.sync(() => {
    if (cpu < 0) return
    for (const pid of pids) execFileSync("taskset", ["-a", "-p", "-c", String(cpu), String(pid)], { stdio: "ignore" })
  })

/** Waits until something accepts TCP connections on the port (at most 10 s). */
const listening = (port: number) =>
  Effect.promise(async () => {
    for (let i = 0; i < 200; i++) {
      const ok = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: "127.0.0.1", port }, () => {
          socket.destroy()
          resolve(true)
        })
        socket.on("error", () => resolve(false))
      })
      if (ok) return true
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    return false
  })

/**
 * stunnel4 in server mode in front of `target`: its `pgsql` protocol answers the client's SSLRequest, completes
 * the TLS handshake with `certificates`, and relays the plain protocol to the target (which refuses or accepts
 * the client as it would without TLS). Logs only errors (a line per connection would cost it and the lab CPU).
 */
export const stunnel = Effect.fnUntraced(
  function*(target: { readonly port: number }, certificates: Certificates.Certificates) {
    const directory = yield* Effect.acquireRelease(
      Effect.sync(() => Orphans.makeDirectory("stunnel")),
      (d) => Effect.sync(() => Orphans.remove(d))
    )
    const port = yield* Cluster.freePort
    const account = Process.serviceAccount()
    const file = (name: string, text: string, mode: number) => {
      const path = join(directory, name)
      writeFileSync(path, text, { mode })
      if (account !== undefined) chownSync(path, account.uid, account.gid)
      return path
    }
    const cert = file("server.crt", certificates.cert, 0o600)
    const key = file("server.key", certificates.key, 0o600)
    const config = file(
      "stunnel.conf",
      [
        "foreground = yes",
        "pid =",
        "syslog = no",
        "debug = err",
        "[pgsql]",
        `accept = 127.0.0.1:${port}`,
        `connect = 127.0.0.1:${target.port}`,
        "protocol = pgsql",
        `cert = ${cert}`,
        `key = ${key}`,
        "socket = l:TCP_NODELAY=1",
        "socket = r:TCP_NODELAY=1"
      ].join("\n") + "\n",
      0o644
    )
    if (account !== undefined) chownSync(directory, account.uid, account.gid)
    const command = stunnelBinary()
    if (command === undefined) {
      return yield* Effect.fail(new Error(stunnelMissing))
    }
    // at `debug = err` the one line stunnel prints while it reads its configuration (no CA to verify clients
    // against, as none is wanted); it listens a moment later
    const child = yield* Process.start({
      server: "stunnel",
      command,
      args: [config],
      readyWhen: "No trusted certificates"
    })
    if (!(yield* listening(port))) return yield* Effect.fail(new Error(`stunnel is not listening on ${port}`))
    return { port, pid: child.pid ?? 0 }
  }
)

/**
 * A pooler in front of `cluster` in the current scope: PgBouncer (transaction mode, the settings' limits and
 * auth, its admin console open to `admin_users`), with TLS for its clients as the settings say, its processes
 * pinned to `poolerCpu`. `certificates`: the server certificate under TLS.
 */
export const pooler = (
  cluster: Cluster.Cluster,
  settings: PoolerSettings,
  certificates: Certificates.Certificates | undefined,
  extra: Readonly<Record<string, string | number>> = {}
) =>
  Effect.gen(function*() {
    const ownTls = settings.tls === "pgbouncer" && certificates !== undefined
    const bouncer = yield* PgBouncer.start({
      upstream: cluster,
      maxClientConn: settings.maxClientConn,
      poolSize: settings.poolSize,
      poolMode: "transaction",
      queryWaitTimeout: settings.queryWaitTimeoutSeconds,
      ...(ownTls ? { clientTls: { sslmode: "require", cert: certificates.cert, key: certificates.key } } : {}),
      settings: { admin_users: cluster.user, ...(yield* authSettings(cluster, settings.auth)), ...extra }
    })
    const admin = withSslmode(bouncer.url.replace(/\/postgres$/, "/pgbouncer"), ownTls)
    if (settings.tls === "stunnel" && certificates !== undefined) {
      const front = yield* stunnel(bouncer, certificates)
      const pids = [bouncer.pid, front.pid]
      yield* pin(pids, settings.poolerCpu)
      return {
        bouncer,
        url: withSslmode(withPort(bouncer.url, front.port), true),
        adminUrl: admin,
        pids
      } satisfies Pooler
    }
    yield* pin([bouncer.pid], settings.poolerCpu)
    return { bouncer, url: withSslmode(bouncer.url, ownTls), adminUrl: admin, pids: [bouncer.pid] } satisfies Pooler
  })

/** The pooler's server certificate, when the settings ask for TLS (deleted with the scope). */
export const certificatesFor = (settings: Pick<Settings, "tls" | "tlsKey">) =>
  settings.tls === "none"
    ? Effect.succeed(undefined)
    : Effect.map(Certificates.make({ serverKey: settings.tlsKey }), (c): Certificates.Certificates | undefined => c)

/** Starts the cluster and the pooler in the current scope. */
export const start = (settings: Pick<Settings, "maxConnections"> & PoolerSettings) =>
  Effect.gen(function*() {
    const cluster = yield* Cluster.start({ maxConnections: settings.maxConnections })
    const certificates = yield* certificatesFor(settings)
    const front = yield* pooler(cluster, settings, certificates)
    return {
      cluster,
      bouncer: front.bouncer,
      url: front.url,
      adminUrl: front.adminUrl,
      poolerPids: front.pids
    } satisfies Parts
  })

/**
 * A `pg` client's configuration for a URL of the lab's: `sslmode=require` (the lab's own TLS) is TLS without
 * verification, as libpq means it (node-postgres alone would verify the certificate).
 */
export const clientConfig = (url: string, applicationName: string): pg.ClientConfig =>
  url.endsWith("?sslmode=require")
    ? {
      connectionString: url.slice(0, -"?sslmode=require".length),
      ssl: { rejectUnauthorized: false },
      application_name: applicationName
    }
    : { connectionString: url, application_name: applicationName }

/** A plain `pg` client that is closed with the scope. */
export const client = (url: string, applicationName: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const c = new pg.Client(clientConfig(url, applicationName))
        c.on("error", () => undefined)
        await c.connect()
        return c
      },
      catch: (cause) => new Error(`${applicationName}: cannot connect: ${String(cause)}`)
    }),
    (c) => Effect.promise(() => c.end().catch(() => undefined))
  )

/** PgBouncer's view of its one pool, and of every client it holds. */
export interface PoolView {
  /** Clients of the lab's pool that are linked to a server or idle (`cl_active`). */
  readonly clientsActive: number
  /** Clients of the lab's pool waiting for a server connection (`cl_waiting`). */
  readonly clientsWaiting: number
  /** Server connections in use and idle (`sv_active`, `sv_idle` + `sv_used`). */
  readonly serversActive: number
  readonly serversIdle: number
  /** Every client of every pool (the admin console included): what `max_client_conn` limits. */
  readonly clientsTotal: number
  /** Transactions served so far (`SHOW STATS` `total_xact_count` of the lab's database). */
  readonly transactions: number
}

const num = (value: unknown): number => Number(value ?? 0)

/** Reads `SHOW POOLS` and `SHOW STATS` from the admin console (simple-query protocol, as it requires). */
export const poolView = (admin: pg.Client): Effect.Effect<PoolView, Error> =>
  Effect.tryPromise({
    try: async () => {
      const pools = (await admin.query("SHOW POOLS")).rows as Array<Record<string, unknown>>
      const stats = (await admin.query("SHOW STATS")).rows as Array<Record<string, unknown>>
      const mine = pools.find((row) => row["database"] === "postgres") ?? {}
      return {
        clientsActive: num(mine["cl_active"]),
        clientsWaiting: num(mine["cl_waiting"]),
        serversActive: num(mine["sv_active"]),
        serversIdle: num(mine["sv_idle"]) + num(mine["sv_used"]),
        clientsTotal: pools.reduce((sum, row) => sum + num(row["cl_active"]) + num(row["cl_waiting"]), 0),
        transactions: num(stats.find((row) => row["database"] === "postgres")?.["total_xact_count"])
      }
    },
    catch: (cause) => new Error(`pgbouncer admin console: ${String(cause)}`)
  })

/** Kernel clock ticks per second (`getconf CLK_TCK`; 100 on Linux). */
const ticksPerSecond = 100

/** CPU seconds (user + system) the processes have used so far, together. */
export const cpuSecondsOf = (pids: ReadonlyArray<number>): number => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0)

/** CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`. */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // after the command name: state is field 3, utime field 14, stime field 15 (1-based in proc(5))
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}
