/** The queue's SQL against real PostgreSQL: claim order and exclusivity, stale cleanup, the partial index. */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Effect } from "effect"
import * as Queue from "../src/Queue.ts"
import * as SchemaName from "../src/SchemaName.ts"
import { count, Database, freshSchema } from "./support.ts"

const items = (unit: string, n: number, taskType = "t") =>
  Array.from({ length: n }, (_, i) => ({ workUnitKey: unit, taskType, payload: { i } }))

layer(Database, { excludeTestServices: true })("Queue (PostgreSQL)", (it) => {
  it.effect("claims at most `limit` units, oldest first, skipping units that are owned", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      // Unit c is oldest, then a, then b, then d (by their first unprocessed id).
      yield* db.withConnection((c) =>
        Queue.enqueue(c, schema, [
          ...items("c", 2),
          ...items("a", 1),
          ...items("b", 3),
          ...items("c", 1),
          ...items("d", 1)
        ])
      )
      const first = yield* db.withConnection((c) => Queue.claim(c, schema, 2, "one"))
      assert.deepStrictEqual(first, ["c", "a"])
      const second = yield* db.withConnection((c) => Queue.claim(c, schema, 10, "two"))
      assert.deepStrictEqual(second, ["b", "d"])
      assert.deepStrictEqual(yield* db.withConnection((c) => Queue.claim(c, schema, 10, "three")), [])
      // Released units become claimable again; a release by the wrong owner does nothing.
      assert.strictEqual(yield* db.withConnection((c) => Queue.release(c, schema, ["c"], "two")), 0)
      assert.strictEqual(yield* db.withConnection((c) => Queue.release(c, schema, ["c"], "one")), 1)
      assert.deepStrictEqual(yield* db.withConnection((c) => Queue.claim(c, schema, 10, "three")), ["c"])
    }))

  it.effect("units whose items are all processed are not claimed", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      yield* db.withConnection((c) => Queue.enqueue(c, schema, [...items("done", 2), ...items("open", 1)]))
      yield* db.query(`UPDATE ${SchemaName.qualify(schema, "queue")} SET processed = true WHERE work_unit_key = 'done'`)
      assert.deepStrictEqual(yield* db.withConnection((c) => Queue.claim(c, schema, 10, "x")), ["open"])
    }))

  it.effect("concurrent claims from many instances never hand out a unit twice", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const units = Array.from({ length: 40 }, (_, i) => `unit-${i}`)
      yield* db.withConnection((c) => Queue.enqueue(c, schema, units.flatMap((u) => items(u, 2))))
      const claimed: Array<string> = []
      for (let round = 0; round < 10 && claimed.length < units.length; round++) {
        const results = yield* Effect.all(
          Array.from({ length: 10 }, (_, i) => db.withConnection((c) => Queue.claim(c, schema, 3, `owner-${i}`))),
          { concurrency: "unbounded" }
        )
        claimed.push(...results.flat())
      }
      assert.strictEqual(new Set(claimed).size, claimed.length, "no unit was claimed twice")
      assert.deepStrictEqual([...claimed].sort(), [...units].sort())
      assert.strictEqual(
        yield* count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "active_queue_sessions")}`),
        40
      )
    }))

  it.effect("stale cleanup removes only rows without a recent heartbeat", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const sessions = SchemaName.qualify(schema, "active_queue_sessions")
      yield* db.query(
        `INSERT INTO ${sessions} (work_unit_key, owner, last_updated) VALUES
         ('stale', 'dead', now() - interval '10 minutes'), ('fresh', 'alive', now())`
      )
      const freed = yield* db.withConnection((c) => Queue.cleanupStale(c, schema, 300))
      assert.deepStrictEqual(freed, ["stale"])
      assert.strictEqual(yield* count(`SELECT count(*) FROM ${sessions}`), 1)
      // A heartbeat keeps a row alive; heartbeats of another owner do not count.
      assert.isTrue(yield* db.withConnection((c) => Queue.heartbeat(c, schema, "fresh", "alive")))
      assert.isFalse(yield* db.withConnection((c) => Queue.heartbeat(c, schema, "fresh", "someone-else")))
    }))

  it.effect("the stale cleanup skips rows locked by another transaction", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const sessions = SchemaName.qualify(schema, "active_queue_sessions")
      yield* db.query(
        `INSERT INTO ${sessions} (work_unit_key, owner, last_updated) VALUES ('locked', 'x', now() - interval '1 hour')`
      )
      const freed = yield* db.transaction((holder) =>
        Effect.gen(function*() {
          yield* holder.query(`SELECT 1 FROM ${sessions} WHERE work_unit_key = 'locked' FOR UPDATE`)
          return yield* db.withConnection((c) => Queue.cleanupStale(c, schema, 300))
        })
      )
      assert.deepStrictEqual(freed, [], "the locked row was skipped, not waited for")
      assert.deepStrictEqual(yield* db.withConnection((c) => Queue.cleanupStale(c, schema, 300)), ["locked"])
    }))

  it.effect("complete marks the item and reports whether the unit is still ours", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      yield* db.withConnection((c) => Queue.enqueue(c, schema, items("u", 2)))
      yield* db.withConnection((c) => Queue.claim(c, schema, 1, "me"))
      const [first, second] = yield* db.withConnection((c) => Queue.nextItems(c, schema, "u", 10))
      assert.isTrue(yield* db.withConnection((c) => Queue.complete(c, schema, first!, "me", undefined)))
      assert.isFalse(yield* db.withConnection((c) => Queue.complete(c, schema, second!, "not-me", "boom")))
      const rows = yield* db.query<{ processed: boolean; error: string | null }>(
        `SELECT processed, error FROM ${SchemaName.qualify(schema, "queue")} ORDER BY id`
      )
      assert.deepStrictEqual(rows, [{ processed: true, error: null }, { processed: true, error: "boom" }])
    }))

  it.effect("the claim reads the partial index of unprocessed rows, not the history", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const db = yield* DbSession
      const queue = SchemaName.qualify(schema, "queue")
      yield* db.query(
        `INSERT INTO ${queue} (work_unit_key, task_type, payload, processed)
         SELECT 'old-' || (g % 1000), 't', '{}'::jsonb, true FROM generate_series(1, 50000) g`
      )
      yield* db.withConnection((c) =>
        Queue.enqueue(c, schema, Array.from({ length: 10 }, (_, i) => items(`new-${i}`, 1)[0]!))
      )
      yield* db.query(`ANALYZE ${queue}`)
      const plan = yield* db.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (COSTS OFF) ${Queue.claimSql(schema)}`,
        [4, "explain"]
      )
      const text = plan.map((row) => row["QUERY PLAN"]).join("\n")
      assert.include(text, "queue_unprocessed_idx", text)
      assert.notInclude(text, `Seq Scan on queue q`, text)
    }))
})
