/**
 * A PostgreSQL container through testcontainers, for machines that have a container engine.
 */
import { Process } from "@resilience/local-postgres"
import { PostgreSqlContainer } from "@testcontainers/postgresql"
import { Effect } from "effect"

/** The image the container path runs; the same major version as the embedded binaries. */
export const image = "postgres:18-alpine"

/** Starts a PostgreSQL container, stopped when the scope closes; yields its superuser URL. */
export const start = Effect.acquireRelease(
  Effect.tryPromise({
    try: () => new PostgreSqlContainer(image).withCommand(["postgres", "-c", "max_connections=200"]).start(),
    catch: (cause) => new Process.ServerStartFailed({ server: "postgres container", output: String(cause) })
  }),
  (container) => Effect.promise(() => container.stop())
).pipe(Effect.map((container) => container.getConnectionUri()))
