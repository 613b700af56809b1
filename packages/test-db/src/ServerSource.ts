/**
 * Which real PostgreSQL a test run talks to: an explicit URL, a build named by `RESILIENCE_POSTGRES_BIN`, a
 * container, or embedded binaries from npm.
 */
import { Cluster } from "@resilience/local-postgres"
import { Effect } from "effect"
import { request } from "node:http"

/** Where the shared test server comes from, in order of preference. */
export type ServerSource =
  | { readonly _tag: "Url"; readonly url: string }
  /** A cluster of the build in this directory (`RESILIENCE_POSTGRES_BIN`, see `Cluster.binariesVariable`). */
  | { readonly _tag: "Binaries"; readonly directory: string }
  | { readonly _tag: "Container" }
  | { readonly _tag: "Embedded" }

/**
 * What the selection looks at: the environment's URL, the server build it names, and whether a container engine
 * answered.
 */
export interface Environment {
  readonly testDatabaseUrl: string | undefined
  readonly serverBinaries?: string | undefined
  readonly containerEngineReachable: boolean
}

/**
 * `TEST_DATABASE_URL` when set; else a cluster of the build `RESILIENCE_POSTGRES_BIN` names (a run asked for that
 * build: a container engine must not take its place); else a container when an engine is reachable; else embedded
 * PostgreSQL.
 */
export const choose = (environment: Environment): ServerSource => {
  const url = environment.testDatabaseUrl?.trim()
  if (url !== undefined && url !== "") return { _tag: "Url", url }
  const directory = environment.serverBinaries?.trim()
  if (directory !== undefined && directory !== "") return { _tag: "Binaries", directory }
  return environment.containerEngineReachable ? { _tag: "Container" } : { _tag: "Embedded" }
}

/** The Docker-compatible engine socket: `DOCKER_HOST` when it is a unix socket, else the default path. */
export const engineSocketPath = (dockerHost: string | undefined): string | undefined => {
  if (dockerHost === undefined || dockerHost === "") return "/var/run/docker.sock"
  return dockerHost.startsWith("unix://") ? dockerHost.slice("unix://".length) : undefined
}

/** Whether a container engine answers `GET /_ping` on its socket within half a second. */
export const containerEngineReachable: Effect.Effect<boolean> = Effect.callback<boolean>((resume) => {
  const socketPath = engineSocketPath(process.env["DOCKER_HOST"])
  if (socketPath === undefined) {
    // A TCP DOCKER_HOST: leave the decision to testcontainers, which reads the same variable.
    resume(Effect.succeed(true))
    return
  }
  const ping = request({ socketPath, path: "/_ping", method: "GET", timeout: 500 }, (response) => {
    response.resume()
    resume(Effect.succeed(response.statusCode === 200))
  })
  ping.on("timeout", () => ping.destroy())
  ping.on("error", () => resume(Effect.succeed(false)))
  ping.end()
})

/** The source for this process, read from `TEST_DATABASE_URL` and a probe of the container engine. */
export const detect: Effect.Effect<ServerSource> = Effect.map(
  containerEngineReachable,
  (containerEngineReachable) =>
    choose({
      testDatabaseUrl: process.env["TEST_DATABASE_URL"],
      serverBinaries: process.env[Cluster.binariesVariable],
      containerEngineReachable
    })
)
