/**
 * Calibration: what PgBouncer costs on this machine, in its own CPU time (from `/proc/<pid>/stat`), per
 * accepted connection (TCP accept, startup, authentication, close), per refused connection (beyond
 * `max_client_conn`) and per relayed transaction; and what one claim on an empty queue costs the database.
 * These are the simulator's `connect-cost`, `reject-cost`, `relay-cost` and `claim-ms`.
 */
import { DbSession } from "@resilience/db-session"
import { Queue } from "@resilience/deriver"
import { Clock, Effect } from "effect"
import { loadavg } from "node:os"
import pg from "pg"
import * as Fleet from "./Fleet.ts"
import * as Pooler from "./Pooler.ts"
import { type Auth, defaults, type Settings } from "./Settings.ts"

/** The measured costs, milliseconds. */
export interface Calibration {
  readonly auth: Auth
  readonly tls: Settings["tls"]
  readonly tlsKey: Settings["tlsKey"]
  /** The CPU the pooler was pinned to (-1: not pinned). */
  readonly poolerCpu: number
  /** `uptime`'s load averages (1, 5, 15 min) when the measurement ended: other work on the machine. */
  readonly loadAverage: ReadonlyArray<number>
  readonly samples: number
  /** The pooler's CPU (PgBouncer, and stunnel in front) per accepted connection (TLS, login and close, no statement). */
  readonly connectCostMillis: number
  /** The pooler's CPU per connection refused at `max_client_conn` (after its TLS handshake, if any). */
  readonly rejectCostMillis: number
  /** PgBouncer CPU per relayed one-statement transaction. */
  readonly relayCostMillis: number
  /** Wall time of one claim on an empty queue, as the client sees it (through the pooler). */
  readonly claimMillis: number
  /** Wall time of one connection attempt as the lab's client sees it: accepted, refused. */
  readonly clientConnectMillis: number
  readonly clientRefuseMillis: number
}

/** The simulator's defaults, for comparison in the README and the report. */
export const simulatorDefaults = { connectCostMillis: 1, rejectCostMillis: 1, relayCostMillis: 0.25 } as const

/** Runs `count` connection attempts, `concurrency` at a time; returns how many were accepted. */
const connections = (url: string, count: number, concurrency: number) =>
  Effect.promise(async () => {
    let accepted = 0
    let next = 0
    const worker = async () => {
      while (next < count) {
        next++
        const client = new pg.Client({
          ...Pooler.clientConfig(url, "lab-calibration"),
          connectionTimeoutMillis: 10_000
        })
        client.on("error", () => undefined)
        const ok = await client.connect().then(() => true, () => false)
        if (ok) {
          accepted++
          await client.end().catch(() => undefined)
        }
      }
    }
    await Promise.all(Array.from({ length: concurrency }, worker))
    return accepted
  })

/** The pooler's CPU and wall time around `effect`. */
const timed = <A, E, R>(pids: ReadonlyArray<number>, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const cpu = Pooler.cpuSecondsOf(pids)
    const start = yield* Clock.currentTimeMillis
    const value = yield* effect
    return {
      value,
      cpuMillis: (Pooler.cpuSecondsOf(pids) - cpu) * 1000,
      wallMillis: (yield* Clock.currentTimeMillis) - start
    }
  })

/** Measures on fresh parts (`samples` attempts of each kind). */
export const measure = (
  options: Pick<Settings, "auth" | "tls" | "tlsKey" | "poolerCpu"> & { readonly samples: number }
) =>
  Effect.scoped(Effect.gen(function*() {
    const { samples } = options
    const parts = yield* Pooler.start({
      maxConnections: 20,
      maxClientConn: 100,
      poolSize: 4,
      queryWaitTimeoutSeconds: 120,
      auth: options.auth,
      tls: options.tls,
      tlsKey: options.tlsKey,
      poolerCpu: options.poolerCpu
    })
    const pids = parts.poolerPids
    // warm up: the pool's first server connection and the cached server parameters
    yield* connections(parts.url, 20, 4)
    const accepted = yield* timed(pids, connections(parts.url, samples, 8))
    if (accepted.value !== samples) {
      return yield* Effect.fail(new Error(`calibration: ${samples - accepted.value} connections were refused`))
    }
    // refusals: a second pooler whose one client slot is held
    const full = yield* Pooler.pooler(
      parts.cluster,
      {
        maxClientConn: 1,
        poolSize: 1,
        queryWaitTimeoutSeconds: 120,
        auth: options.auth,
        tls: options.tls,
        tlsKey: options.tlsKey,
        poolerCpu: options.poolerCpu
      },
      yield* Pooler.certificatesFor(options)
    )
    yield* Pooler.client(full.url, "lab-calibration-holder")
    const refused = yield* timed(full.pids, connections(full.url, samples, 8))
    if (refused.value !== 0) {
      return yield* Effect.fail(new Error(`calibration: ${refused.value} connections beyond the limit were accepted`))
    }
    const holder = yield* Pooler.client(parts.url, "lab-calibration-relay")
    const relayed = yield* timed(
      pids,
      Effect.promise(async () => {
        for (let i = 0; i < samples; i++) await holder.query("SELECT 1")
      })
    )
    yield* Fleet.prepare(parts.cluster.url, { ...defaults, derivers: 1 })
    const claims = Math.min(samples, 500)
    const claimed = yield* timed(
      pids,
      Effect.gen(function*() {
        const session = yield* DbSession
        yield* session.withConnection((connection) =>
          Effect.repeat(Queue.claim(connection, Fleet.schemaOf(0), 1, "calibration"), { times: claims - 1 })
        )
      }).pipe(Effect.provide(DbSession.layer({
        url: parts.url,
        connectTimeout: "10 seconds",
        poolClass: "null",
        poolSize: 1,
        driver: "pg",
        applicationName: "lab-calibration"
      })))
    )
    return {
      auth: options.auth,
      tls: options.tls,
      tlsKey: options.tlsKey,
      poolerCpu: options.poolerCpu,
      loadAverage: loadavg().map((n) => Math.round(n * 100) / 100),
      samples,
      connectCostMillis: accepted.cpuMillis / samples,
      rejectCostMillis: refused.cpuMillis / samples,
      relayCostMillis: relayed.cpuMillis / samples,
      claimMillis: claimed.wallMillis / claims,
      clientConnectMillis: accepted.wallMillis * 8 / samples,
      clientRefuseMillis: refused.wallMillis * 8 / samples
    } satisfies Calibration
  }))
