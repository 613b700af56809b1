/**
 * The real parts: a throw-away PostgreSQL (embedded binaries, a chosen `max_connections`) and Debian's
 * PgBouncer in front of it in transaction mode (a chosen `max_client_conn` and `default_pool_size`), with
 * its admin console open to the lab. Both stop, and their directories are deleted, when the scope closes;
 * both die with the lab's process even if it is killed (local-postgres's `setpriv --pdeathsig` and orphan reaping).
 */
import { Cluster, Orphans } from "@resilience/local-postgres"
import { PgBouncer } from "@resilience/test-db"
import { Effect } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
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

/** Starts the cluster and the pooler in the current scope. */
export const start = (
  settings: Pick<Settings, "maxConnections" | "maxClientConn" | "poolSize" | "queryWaitTimeoutSeconds" | "auth">
) =>
  Effect.gen(function*() {
    const cluster = yield* Cluster.start({ maxConnections: settings.maxConnections })
    const bouncer = yield* PgBouncer.start({
      upstream: cluster,
      maxClientConn: settings.maxClientConn,
      poolSize: settings.poolSize,
      poolMode: "transaction",
      queryWaitTimeout: settings.queryWaitTimeoutSeconds,
      settings: { admin_users: cluster.user, ...(yield* authSettings(cluster, settings.auth)) }
    })
    return {
      cluster,
      bouncer,
      url: bouncer.url,
      adminUrl: bouncer.url.replace(/\/postgres$/, "/pgbouncer")
    } satisfies Parts
  })

/** A plain `pg` client that is closed with the scope. */
export const client = (url: string, applicationName: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const c = new pg.Client({ connectionString: url, application_name: applicationName })
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

/** CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat`. */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // after the command name: state is field 3, utime field 14, stime field 15 (1-based in proc(5))
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}
