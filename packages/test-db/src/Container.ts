/**
 * A PostgreSQL container through testcontainers, for machines that have a container engine. testcontainers is
 * loaded when a container starts, not with this module: every test process that imports this package would
 * otherwise load it (and dockerode, gRPC, protobuf), CPU spent on machines that start no container.
 */
import { Process } from "@resilience/local-postgres"
import { Effect } from "effect"

/** The image the container path runs; the same major version as the embedded binaries. */
export const image = "postgres:18-alpine"

/** Starts a PostgreSQL container, stopped when the scope closes; yields its superuser URL. */
export const start = Effect.acquireRelease(
  Effect.tryPromise({
    try: async () => {
      const { PostgreSqlContainer } = await import("@testcontainers/postgresql")
      return new PostgreSqlContainer(image).withCommand(["postgres", "-c", "max_connections=200"]).start()
    },
    catch: (cause) => new Process.ServerStartFailed({ server: "postgres container", output: String(cause) })
  }),
  (container) => Effect.promise(() => container.stop())
).pipe(Effect.map((container) => container.getConnectionUri()))
