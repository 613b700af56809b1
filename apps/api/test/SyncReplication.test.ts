/**
 * The API over real HTTP when its commits wait for a synchronous standby that does not answer (a cluster of its
 * own whose `synchronous_standby_names` names a standby that never connects): a write whose wait is cancelled
 * (an operator's `pg_cancel_backend`) or outlasts the session's deadline is answered 503 with `Retry-After`,
 * never 201, although it is committed on the primary; once the standby is no longer awaited, the resend under
 * the same `Idempotency-Key` answers the recorded response and stores nothing twice.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Cluster } from "@resilience/local-postgres"
import { Eventually } from "@resilience/test-db"
import { Context, Effect, Fiber, Layer } from "effect"
import pg from "pg"
import { createWorkspace, postMessages, start } from "./TestServer.ts"

/** A cluster of this file's own: its replication settings would disturb any other suite. */
class OwnCluster extends Context.Service<OwnCluster, Cluster.Cluster>()("test/OwnCluster") {
  static readonly layer = Layer.effect(OwnCluster, Cluster.start({ maxConnections: 20 }))
}

const schema = "sync_replication"

/** One statement on a connection of its own that never waits for a standby. */
const admin = <Row>(url: string, sql: string, params: ReadonlyArray<unknown> = []) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url, options: "-c synchronous_commit=local" })
    await client.connect()
    return (await client.query(sql, [...params]).finally(() => client.end())).rows as ReadonlyArray<Row>
  })

/** Every commit of a new session waits for the standby `nosuch` (or, `off`, for none). */
const awaitStandby = (url: string, on: boolean) =>
  Effect.gen(function*() {
    // The test cluster runs with synchronous_commit=off on its command line; a database's setting overrides it.
    yield* admin(url, `alter database postgres set synchronous_commit = ${on ? "on" : "local"}`)
    yield* admin(url, on ? "alter system set synchronous_standby_names = 'nosuch'" : "alter system reset all")
    yield* admin(url, "select pg_reload_conf()")
  })

const storedCount = (url: string, content: string) =>
  Effect.map(
    admin<{ n: number }>(url, `select count(*)::int as n from ${schema}.messages where content = $1`, [content]),
    (rows) => rows[0]?.n ?? -1
  )

/** The API's backends waiting for the standby right now. */
const waitingForStandby = (url: string) =>
  admin<{ pid: number }>(
    url,
    "select pid from pg_stat_activity where application_name = 'api-test' and wait_event = 'SyncRep'"
  )

describe("apps/api under synchronous replication", () => {
  layer(OwnCluster.layer, { excludeTestServices: true, timeout: "120 seconds" })((it) => {
    it.effect("a commit not confirmed by the standby: 503 + Retry-After, never 201; the resend replays it", () =>
      Effect.gen(function*() {
        const cluster = yield* OwnCluster
        const api = yield* start({ url: cluster.url, schema, statementTimeout: "1 second" })
        const token = yield* createWorkspace(api, "acme")
        yield* awaitStandby(cluster.url, true)

        // 1. The wait for the standby cancelled by someone else (an operator, a watchdog): PostgreSQL answers
        //    the COMMIT with success and a WARNING; the API answers 503.
        const cancelled = yield* Effect.forkChild(postMessages(api, token, ["cancelled"], "key-cancelled"))
        const waiting = yield* Eventually.satisfying(
          "the write's COMMIT waiting for the standby",
          waitingForStandby(cluster.url),
          (rows) => rows.length > 0
        )
        assert.lengthOf(waiting, 1, "the write's COMMIT waits for the standby")
        yield* admin(cluster.url, "select pg_cancel_backend($1)", [waiting[0]?.pid])
        const first = yield* Fiber.join(cancelled)
        assert.strictEqual(first.status, 503, first.text)
        assert.strictEqual(first.headers.get("retry-after"), "1")
        // An unknown outcome, not "nothing happened": the message is on the primary.
        assert.strictEqual(yield* storedCount(cluster.url, "cancelled"), 1)

        // 2. Nobody cancels: the session's deadline (the statement timeout + 1 s) ends the request, 503.
        const deadline = yield* postMessages(api, token, ["deadline"], "key-deadline")
        assert.strictEqual(deadline.status, 503, deadline.text)
        assert.strictEqual(deadline.headers.get("retry-after"), "1")

        // 3. The standby no longer awaited: each resend under its key answers the recorded 201, stores nothing.
        yield* awaitStandby(cluster.url, false)
        for (const [key, content] of [["key-cancelled", "cancelled"], ["key-deadline", "deadline"]] as const) {
          const resend = yield* postMessages(api, token, [content], key)
          assert.strictEqual(resend.status, 201, resend.text)
          assert.strictEqual(yield* storedCount(cluster.url, content), 1, `${content}: stored once`)
        }
      }))
  })
})
