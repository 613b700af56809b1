/**
 * The one server a test run shares: the URL the Vitest global setup published, or one chosen and started now
 * (`TEST_DATABASE_URL`, else the build `RESILIENCE_POSTGRES_BIN` names, else a container, else embedded PostgreSQL).
 */
import { Cluster } from "@resilience/local-postgres"
import { Effect } from "effect"
import * as Container from "./Container.ts"
import * as ServerSource from "./ServerSource.ts"

/** The variable through which the global setup hands the server's superuser URL to test workers. */
export const urlVariable = "RESILIENCE_TEST_SERVER_URL"

/** Starts (or adopts) a server for the chosen source; yields a superuser URL. Scoped: what it started, it stops. */
export const acquire = Effect.gen(function*() {
  const published = process.env[urlVariable]
  if (published !== undefined && published !== "") return published
  const source = yield* ServerSource.detect
  switch (source._tag) {
    case "Url":
      return source.url
    case "Container":
      return yield* Container.start
    case "Binaries":
    case "Embedded":
      // `Cluster.start` runs the build of `RESILIENCE_POSTGRES_BIN` when it is set
      return (yield* Cluster.start({ maxConnections: 200 })).url
  }
})
