/**
 * An isolated database for one test suite on the shared server: created fresh when the layer is built,
 * dropped (with its connections) when it is released.
 */
import type { ServerStartFailed } from "@resilience/local-postgres"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import pg from "pg"
import * as SharedServer from "./SharedServer.ts"

/** The suite's own database. */
export class TestDatabase extends Context.Service<TestDatabase, {
  /** Superuser URL of the suite's database. */
  readonly url: string
  /** Its name. */
  readonly database: string
  /** Superuser URL of the server's maintenance database. */
  readonly serverUrl: string
}>()("@resilience/test-db/TestDatabase") {
  /** A fresh database on the shared server, dropped when the layer is released. */
  static readonly layer = Layer.effect(
    TestDatabase,
    Effect.gen(function*() {
      const serverUrl = yield* SharedServer.acquire
      const database = `test_${randomBytes(6).toString("hex")}`
      yield* Effect.acquireRelease(
        admin(serverUrl, `CREATE DATABASE ${database}`),
        () => admin(serverUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).pipe(Effect.ignore)
      )
      const url = new URL(serverUrl)
      url.pathname = `/${database}`
      return TestDatabase.of({ url: url.toString(), database, serverUrl })
    })
  )

  /**
   * A layer built on the suite's database (say, a database session for its URL), together with the
   * `TestDatabase` itself.
   */
  static readonly layerWith = <A, E, R>(
    make: (database: TestDatabase["Service"]) => Layer.Layer<A, E, R>
  ): Layer.Layer<A | TestDatabase, E | ServerStartFailed, Exclude<R, TestDatabase>> =>
    Layer.unwrap(Effect.map(Effect.service(TestDatabase), make)).pipe(Layer.provideMerge(TestDatabase.layer))
}

/** Runs one statement as the superuser on a fresh connection. */
export const admin = (url: string, sql: string): Effect.Effect<void> =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(sql).finally(() => client.end())
  })
