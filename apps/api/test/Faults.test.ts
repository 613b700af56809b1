/**
 * The API under the faults a managed PostgreSQL really has: the database turns read-only (as right after a
 * failover, every write fails with 25006), and a statement hangs behind a lock another session holds. Writes
 * answer 503 with Retry-After while it lasts, within the statement deadline, reads keep working, and writes
 * succeed again afterwards. Every post is recorded, and a deriver and the consistency checker run after each
 * fault: every acknowledged message stored and folded once, a refused one nowhere.
 */
import { assert, describe, it } from "@effect/vitest"
import { History } from "@resilience/checker"
import { TableLock, TestDatabase } from "@resilience/test-db"
import { Effect, Fiber, Layer, Random } from "effect"
import { FetchHttpClient } from "effect/http"
import pg from "pg"
import { deriveAndCheck, deriver, post as recorded, retryingClient, send, session, verdict } from "./Checked.ts"
import { createWorkspace, request, start } from "./TestServer.ts"

/** Sets the suite database's default for new sessions, from a session that opts out of read-only first. */
const setReadOnly = (url: string, database: string, on: boolean) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query("SET default_transaction_read_only = off")
    await client.query(`ALTER DATABASE ${database} SET default_transaction_read_only = ${on}`)
    await client.end()
  })

describe("apps/api under database faults", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("read-only after a failover: POST messages is a 503 with Retry-After, reads work, then it recovers", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const api = yield* start({ url: db.url, schema: "read_only" })
        const token = yield* createWorkspace(api, "acme")
        const history = History.make()
        const post = (content: string) =>
          recorded(api, history, token, { client: "c", workspace: "acme", session: "s1", peer: "alice", content })
        assert.strictEqual((yield* post("before")).status, 201)

        yield* setReadOnly(db.url, db.database, true)
        const during = yield* Effect.forEach([1, 2, 3], (i) => post(`during ${i}`))
        const queue = yield* request(api, "GET", "/v1/workspaces/acme/queue", { token })
        yield* setReadOnly(db.url, db.database, false)
        const after = yield* post("after")

        for (const reply of during) {
          assert.strictEqual(reply.status, 503, reply.text)
          assert.strictEqual(reply.headers.get("retry-after"), "1")
          assert.deepStrictEqual(reply.json, { detail: "database temporarily unavailable" })
        }
        assert.strictEqual(queue.status, 200, queue.text)
        assert.strictEqual(after.status, 201, after.text)
        assert.isFalse(api.logs.some((line) => line.level === "Error"), JSON.stringify(api.logs))
        const verdict = yield* deriveAndCheck(db.url, "read_only", history, "API read-only after a failover")
        assert.isTrue(verdict.valid)
        assert.deepStrictEqual([verdict.totals.acknowledged, verdict.totals.unknown, verdict.totals.stored], [2, 3, 2])
        console.log(
          `[figures] API read-only: statuses during=${
            during.map((r) => r.status).join(",")
          } queue=${queue.status} after=${after.status}`
        )
      }))

    it.effect("a write stuck behind a lock: 503 with Retry-After within the statement deadline, then it recovers", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const api = yield* start({ url: db.url, schema: "hanging", statementTimeout: "500 millis" })
        const token = yield* createWorkspace(api, "acme")
        const history = History.make()
        const post = (content: string) =>
          recorded(api, history, token, { client: "c", workspace: "acme", session: "s1", peer: "alice", content })
        const stuck = yield* Effect.scoped(Effect.gen(function*() {
          yield* TableLock.hold(db.url, "hanging.messages")
          return yield* post("stuck")
        }))
        const after = yield* post("after")
        console.log(
          `[figures] API write behind a lock (statement timeout 500 ms): ${stuck.status} in ${
            Math.round(stuck.millis)
          } ms`
        )
        assert.strictEqual(stuck.status, 503, stuck.text)
        assert.strictEqual(stuck.headers.get("retry-after"), "1")
        // The server's statement_timeout (500 ms) ends it; the client-side bound (1.5 s) is the backstop.
        assert.isBelow(stuck.millis, 1_500 + 1_000)
        assert.strictEqual(after.status, 201, after.text)
        const verdict = yield* deriveAndCheck(db.url, "hanging", history, "API write stuck behind a lock")
        assert.isTrue(verdict.valid)
        assert.deepStrictEqual([verdict.totals.acknowledged, verdict.totals.unknown, verdict.totals.stored], [1, 1, 1])
      }))

    it.effect(
      "the deriver's backends killed every 50–250 ms under writes: every acknowledged write stored and folded once",
      () =>
        Effect.gen(function*() {
          const db = yield* TestDatabase
          const schema = "killed"
          // The admission gate off: each request makes its one attempt (the gate's own tests are elsewhere).
          const api = yield* start({ url: db.url, schema, admission: { enabled: false } })
          const token = yield* createWorkspace(api, "acme")
          const history = History.make()
          // The deriver's backends only: killing the API's in-process backends too hangs this test and raises
          // uncaught pg errors (under investigation; see the #21 report).
          const killer = new pg.Client({ connectionString: db.url })
          yield* Effect.promise(() => killer.connect())
          let killed = 0
          const kills = Effect.forever(Effect.gen(function*() {
            yield* Effect.sleep(`${yield* Random.nextBetween(50, 250)} millis`)
            const result = yield* Effect.promise(() =>
              killer.query(
                `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND application_name = 'deriver-test'`
              )
            )
            killed += (result.rows[0] as { n: number }).n
          }))
          const details = () => [...new Set(history.operations.map((o) => `${o.outcome}:${o.detail}`))].join(", ")
          const result = yield* Effect.gen(function*() {
            const client = yield* retryingClient(api)
            yield* deriver(schema)
            const killing = yield* Effect.forkChild(kills)
            yield* Effect.forEach(Array.from({ length: 8 }, (_, c) => c), (c) =>
              Effect.forEach(
                Array.from({ length: 25 }, (_, i) => i),
                (i) =>
                  send(client, history, token, {
                    client: `c${c}`,
                    workspace: "acme",
                    session: "s1",
                    peer: `p${c % 2}`,
                    content: `client ${c} message ${i} copper lanterns`
                  }).pipe(Effect.ignore)
              ), { concurrency: "unbounded", discard: true })
            yield* Fiber.interrupt(killing)
            return yield* verdict(schema, history, `the deriver's backends killed every 50–250 ms (${killed} kills)`)
          }).pipe(Effect.scoped, Effect.provide([Layer.orDie(session(db.url)), FetchHttpClient.layer]))
          yield* Effect.promise(() => killer.end())
          console.log(`[figures] backend kills: ${killed} backends killed; ${JSON.stringify(result.totals)}`)
          assert.isAbove(killed, 0)
          assert.isTrue(result.valid)
          assert.isAbove(result.totals.acknowledged, 150, details())
        }),
      300_000
    )

    it.effect("a permanent failure the client caused is a 4xx naming the field, not a 500", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const api = yield* start({ url: db.url, schema: "permanent" })
        const token = yield* createWorkspace(api, "acme")
        // PostgreSQL text cannot hold NUL (a permanent error, 22P05, if it reached the database).
        const reply = yield* request(api, "POST", "/v1/workspaces/acme/sessions/s1/messages", {
          token,
          body: { messages: [{ peer: "alice", content: "a\u0000b" }] }
        })
        assert.strictEqual(reply.status, 400, reply.text)
        assert.include(reply.text, "content")
      }))
  })
})
