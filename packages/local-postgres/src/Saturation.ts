/**
 * Saturating a server on purpose, the way the incident did: open connections until the server (PostgreSQL, or
 * a pooler in front of it) refuses one, hold them, release them. The one helper that does this, for the demo,
 * the benchmarks and the tests. Its contract:
 *
 * - `held`: how many connections it holds;
 * - `refusal`: the server's answer to the connection after the last one held (say 53300 "too many clients",
 *   or PgBouncer's 08P01 max_client_conn), the proof that the next client is refused;
 * - `release`: closes every held connection and returns only once their backends have exited on the server,
 *   so the slots really are free again (a backend exits as soon as its idle client says goodbye; one busy in
 *   `pg_sleep` would not notice a vanished client unless `client_connection_check_interval` is set, which is
 *   why the held connections stay idle). Also run when the scope closes; running it twice is harmless.
 */
import { Data, Duration, Effect, Ref, type Scope } from "effect"
import pg from "pg"
import * as Cluster from "./Cluster.ts"
import type { ServerStartFailed } from "./Process.ts"

/** How a saturation is held. */
export interface Options {
  /** At most this many connections; a server that accepts them all is not saturated (SaturationFailed). */
  readonly limit?: number
  /** `application_name` of the held connections, what `pg_stat_activity` shows. */
  readonly applicationName?: string
  /** Bound on each connection attempt. */
  readonly connectTimeout?: Duration.Input
  /**
   * Other clients come and go: while refused, keep trying for this long (every 20 ms) to take the slots they
   * free, so that every slot ends up held here. Default: stop at the first refusal.
   */
  readonly patience?: Duration.Input
}

/** The server's refusal of the connection after the last one held. */
export interface Refusal {
  /** SQLSTATE of the refusal. */
  readonly code: string
  readonly message: string
}

/** A saturated server. */
export interface Saturated {
  /** How many connections are held. */
  readonly held: number
  /** Proof that the next connection is refused. */
  readonly refusal: Refusal
  /** Closes the held connections and waits until the server has freed their slots. */
  readonly release: Effect.Effect<void, SaturationFailed>
}

/** The server could not be saturated (it never refused, or failed in another way), or its slots did not free. */
export class SaturationFailed extends Data.TaggedError("SaturationFailed")<{ readonly reason: string }> {
  override get message(): string {
    return `could not saturate the server: ${this.reason}`
  }
}

type Attempt =
  | { readonly _tag: "Open"; readonly client: pg.Client }
  | { readonly _tag: "Refused"; readonly refusal: Refusal }

/** One connection attempt: open, refused by the server (an error response), or a failure that is not a refusal. */
const attempt = (url: string, applicationName: string, connectTimeout: Duration.Duration) =>
  Effect.callback<Attempt, SaturationFailed>((resume) => {
    const client = new pg.Client({
      connectionString: url,
      application_name: applicationName,
      connectionTimeoutMillis: Duration.toMillis(connectTimeout)
    })
    client.on("error", () => undefined)
    client.connect().then(
      () => resume(Effect.succeed({ _tag: "Open", client })),
      (error: unknown) => {
        void client.end().catch(() => undefined)
        resume(
          error instanceof pg.DatabaseError && error.code !== undefined
            ? Effect.succeed({ _tag: "Refused", refusal: { code: error.code, message: error.message } })
            : Effect.fail(new SaturationFailed({ reason: `a connection failed without a refusal: ${String(error)}` }))
        )
      }
    )
  })

/** The backends of `pids` that still exist, seen from a fresh connection (undefined while it is refused). */
const survivors = (url: string, pids: ReadonlyArray<number>, connectTimeout: Duration.Duration) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: Duration.toMillis(connectTimeout) })
    client.on("error", () => undefined)
    const connected = await client.connect().then(() => true, () => false)
    if (!connected) return undefined
    const result = await client.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1::int[])", [
      [...pids]
    ]).finally(() => client.end().catch(() => undefined))
    return (result.rows[0] as { n: number }).n
  })

const pause = Effect.sleep("20 millis")

/**
 * Opens connections to `url` until the server refuses one and holds them until `release` or the end of the
 * scope. Fails with SaturationFailed when the server accepts `limit` connections or a connection fails in a way
 * that is not a refusal.
 */
export const hold = (url: string, options: Options = {}): Effect.Effect<Saturated, SaturationFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const limit = options.limit ?? 1_000
    const applicationName = options.applicationName ?? "saturation"
    const connectTimeout = Duration.fromInputUnsafe(options.connectTimeout ?? "5 seconds")
    const patience = Duration.toMillis(Duration.fromInputUnsafe(options.patience ?? 0))
    const clients: Array<pg.Client> = []
    const released = yield* Ref.make(false)
    const release = Effect.gen(function*() {
      if ((yield* Ref.getAndSet(released, true)) || clients.length === 0) return
      const pids = clients.map((client) => (client as unknown as { processID: number }).processID)
      yield* Effect.promise(() => Promise.all(clients.map((client) => client.end().catch(() => undefined))))
      for (let waited = 0; waited <= 10_000; waited += 20) {
        if ((yield* survivors(url, pids, connectTimeout)) === 0) return
        yield* pause
      }
      return yield* new SaturationFailed({ reason: "the held connections' slots were not freed within 10 s" })
    })
    yield* Effect.addFinalizer(() => Effect.orDie(release))
    const saturate = Effect.gen(function*() {
      let refusal: Refusal | undefined
      let waited = 0
      while (clients.length < limit) {
        const next = yield* attempt(url, applicationName, connectTimeout)
        if (next._tag === "Open") {
          clients.push(next.client)
          continue
        }
        refusal = next.refusal
        if (waited >= patience) break
        waited += 20
        yield* pause
      }
      if (refusal === undefined || clients.length >= limit) {
        return yield* new SaturationFailed({ reason: `the server accepted ${clients.length} connections (the limit)` })
      }
      return { held: clients.length, refusal, release } satisfies Saturated
    })
    // A saturation that fails lets go of what it opened at once, not when the caller's scope closes.
    return yield* Effect.tapError(saturate, () => Effect.orDie(release))
  })

/**
 * A throw-away cluster with `maxConnections` slots, saturated from the start (for tests of what starts during an
 * outage). Both end with the scope.
 */
export const startSaturated = (
  maxConnections: number
): Effect.Effect<
  { readonly cluster: Cluster.Cluster; readonly saturation: Saturated },
  ServerStartFailed | SaturationFailed,
  Scope.Scope
> =>
  Effect.gen(function*() {
    const cluster = yield* Cluster.start({ maxConnections })
    return { cluster, saturation: yield* hold(cluster.url) }
  })
