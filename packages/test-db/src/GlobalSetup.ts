/**
 * Vitest global setup: starts one shared server for the package's run (unless `TEST_DATABASE_URL` names one),
 * publishes its URL to the test workers, and stops it at the end. Also reaps servers that an earlier,
 * interrupted run left behind.
 */
import { Orphans } from "@resilience/local-postgres"
import { Effect, Exit, Scope } from "effect"
import * as SharedServer from "./SharedServer.ts"

/** The `globalSetup` entry: returns the teardown that stops what it started. */
export default async function setup(): Promise<() => Promise<void>> {
  Orphans.reap()
  const scope = Effect.runSync(Scope.make())
  const url = await Effect.runPromise(Scope.provide(SharedServer.acquire, scope))
  process.env[SharedServer.urlVariable] = url
  return async () => {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    Orphans.reap()
  }
}
