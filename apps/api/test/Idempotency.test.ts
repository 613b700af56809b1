/**
 * `Idempotency-Key` on `POST …/messages`, through the real server against real PostgreSQL: a resend with the
 * same key and body answers the first response and stores nothing; five concurrent duplicates (held in flight
 * together behind a lock) store once; the same key with another body is a 422; keys expire after the retention
 * window and are pruned.
 */
import { assert, describe, it } from "@effect/vitest"
import { Eventually, TableLock, TestDatabase } from "@resilience/test-db"
import { Effect, Fiber } from "effect"
import pg from "pg"
import { createWorkspace, postMessages, start } from "./TestServer.ts"

const count = (url: string, sql: string) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const result = await client.query(sql).finally(() => client.end())
    return Number((result.rows[0] as { n: string }).n)
  })

describe("apps/api Idempotency-Key", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("resend, concurrent duplicates, another body, expiry and pruning", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const schema = "idempotency"
        const api = yield* start({ url: db.url, schema, idempotencyRetentionSeconds: 2 })
        const token = yield* createWorkspace(api, "acme")
        const messages = count(db.url, `SELECT count(*) AS n FROM ${schema}.messages`)
        const queued = count(db.url, `SELECT count(*) AS n FROM ${schema}.queue`)
        const keys = count(db.url, `SELECT count(*) AS n FROM ${schema}.idempotency_keys`)

        // A resend with the same key and body: the first response, nothing new stored or queued.
        const first = yield* postMessages(api, token, ["a", "b"], "key-1")
        const resend = yield* postMessages(api, token, ["a", "b"], "key-1")
        assert.strictEqual(first.status, 201, first.text)
        assert.deepStrictEqual([resend.status, resend.text], [first.status, first.text])
        assert.deepStrictEqual([yield* messages, yield* queued], [2, 1])

        // The same key with another body: 422, nothing stored.
        const other = yield* postMessages(api, token, ["c"], "key-1")
        assert.strictEqual(other.status, 422, other.text)
        assert.include(other.text, "Idempotency-Key")
        assert.strictEqual(yield* messages, 2)

        // Five concurrent duplicates, all in flight together: the write is held behind a lock on messages.
        const concurrent = yield* Effect.scoped(Effect.gen(function*() {
          yield* TableLock.hold(db.url, `${schema}.messages`)
          const fibers = yield* Effect.forEach(
            [1, 2, 3, 4, 5],
            () => Effect.forkChild(postMessages(api, token, ["d", "e", "f"], "key-2"))
          )
          // all five wait on a lock (the first on messages, the others on the first's key) before the lock goes
          yield* Eventually.satisfying(
            "the five duplicates waiting on a lock",
            count(
              db.url,
              "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ),
            (waiting) => waiting >= 5
          )
          return fibers
        })).pipe(Effect.flatMap((fibers) => Effect.forEach(fibers, Fiber.join)))
        const statuses = concurrent.map((reply) => reply.status)
        assert.deepStrictEqual(statuses, [201, 201, 201, 201, 201], concurrent.map((r) => r.text).join("\n"))
        assert.strictEqual(new Set(concurrent.map((reply) => reply.text)).size, 1)
        assert.deepStrictEqual([yield* messages, yield* queued], [5, 2])

        // Without a key every POST stores (the key is what makes a resend safe).
        yield* postMessages(api, token, ["g"])
        yield* postMessages(api, token, ["g"])
        assert.strictEqual(yield* messages, 7)

        // After the retention window (2 s here) a key counts as new, and expired keys are pruned. The keys are aged
        // past the window in the database (its clock is what the window is measured on) instead of waiting it out.
        yield* count(
          db.url,
          `WITH aged AS (UPDATE ${schema}.idempotency_keys SET created_at = created_at - interval '3 seconds' RETURNING 1) SELECT count(*) AS n FROM aged`
        )
        const again = yield* postMessages(api, token, ["a", "b"], "key-1")
        assert.strictEqual(again.status, 201, again.text)
        assert.strictEqual(yield* messages, 9)
        // key-1, just written again, is moved an hour ahead: unexpired however late the next pruning round runs
        yield* count(
          db.url,
          `WITH moved AS (UPDATE ${schema}.idempotency_keys SET created_at = now() + interval '1 hour' WHERE key = 'key-1' RETURNING 1) SELECT count(*) AS n FROM moved`
        )
        // the pruning loop (every 1 s ± 50 % here) deletes key-2, expired, and keeps key-1
        const left = yield* Eventually.satisfying("key-2 pruned", keys, (n) => n <= 1)
        assert.strictEqual(left, 1)
        assert.strictEqual(
          yield* count(db.url, `SELECT count(*) AS n FROM ${schema}.idempotency_keys WHERE key = 'key-1'`),
          1
        )
        console.log(
          `[figures] Idempotency-Key: resend ${resend.status}, other body ${other.status}, 5 concurrent ${
            statuses.join("/")
          }, messages stored ${yield* messages} (expected 9), keys left ${left}`
        )
      }))
  })
})
