/**
 * Every statement's rows are decoded, not cast: against real PostgreSQL, each statement's real rows pass its schema
 * under both drivers (`pg`, `postgres`), and a row of the wrong shape (the real rows with one field changed on the
 * way back, or a server function that returns another shape) fails the function with `QueryFailed` naming the
 * statement and the field.
 */
import { assert, describe, layer } from "@effect/vitest"
import { type Connection, type DbError, DbSession } from "@resilience/db-session"
import type { SchemaName } from "@resilience/schema"
import { TestSession } from "@resilience/test-db"
import { Effect, Layer } from "effect"
import * as DeadLetters from "../src/DeadLetters.ts"
import * as Enqueue from "../src/Enqueue.ts"
import { names } from "../src/internal/Names.ts"
import * as Maintenance from "../src/Maintenance.ts"
import * as Queue from "../src/Queue.ts"
import { freshSchema } from "./support.ts"

/** Two units of two items and one of one, all due; a unit waiting for its time a day from now. */
const enqueueUnits = (connection: Connection, schema: SchemaName.SchemaName) =>
  Enqueue.enqueue(connection, schema, [
    { workUnitKey: "u1", taskType: "t", payload: { i: 1 } },
    { workUnitKey: "u1", taskType: "t", payload: { i: 2 } },
    { workUnitKey: "u2", taskType: "t", payload: { i: 3 } },
    { workUnitKey: "u2", taskType: "t", payload: { i: 4 } },
    { workUnitKey: "u3", taskType: "t", payload: { i: 5 } },
    { workUnitKey: "later", taskType: "t", payload: {}, runAt: Date.now() + 86_400_000 }
  ])

/** The claim of `u1` by owner `a`, with its items. */
const claimFirst = (connection: Connection, schema: SchemaName.SchemaName) =>
  Effect.map(Queue.poll(connection, schema, 1, "a", 10), ({ claimed }) => claimed[0]!)

const done = (items: ReadonlyArray<Queue.Item>): ReadonlyArray<Queue.Outcome> =>
  items.map((item) => ({ item, error: undefined }))

/** Every statement once on a fresh queue, so that each returns rows, and what each read from them. */
const everyStatement = Effect.gen(function*() {
  const schema = yield* freshSchema
  const db = yield* DbSession
  return yield* db.withConnection((c) =>
    Effect.gen(function*() {
      const enqueued = yield* enqueueUnits(c, schema)
      const first = yield* claimFirst(c, schema)
      const next = yield* Queue.nextItems(c, schema, first.claim, 10)
      const beat = yield* Queue.heartbeat(c, schema, first.claim)
      const beats = yield* Queue.heartbeats(c, schema, "a", [first.claim, { ...first.claim, id: "0" }])
      const dead = yield* Queue.record(c, schema, first.claim, [{ item: next[0]!, error: "boom", dead: true }], false)
      const along = yield* Queue.recordAndClaim(c, schema, first.claim, done(next.slice(1)), true, 1, 10)
      const second = along.claimed[0]!
      const units = yield* Queue.recordUnits(
        c,
        schema,
        "a",
        [{ claim: second.claim, outcomes: done(second.items), release: true }],
        1,
        10
      )
      const third = units.claimed[0]!
      const released = yield* Queue.release(c, schema, [third.claim])
      const stale = yield* Queue.claimWithItems(c, schema, 1, "b", 10)
      const freed = yield* Maintenance.cleanupStale(c, schema, 0)
      yield* Queue.claim(c, schema, 1, "c")
      const releasedOwner = yield* Queue.releaseOwner(c, schema, "c")
      const last = (yield* Queue.poll(c, schema, 1, "d", 10)).claimed[0]!
      yield* Queue.record(c, schema, last.claim, done(last.items), true)
      const idle = yield* Queue.poll(c, schema, 1, "d", 10)
      const pruned = yield* Maintenance.pruneHistory(c, schema, 0, 100)
      yield* Enqueue.enqueue(c, schema, [{ workUnitKey: "u4", taskType: "t", payload: {} }])
      const depth = yield* Maintenance.depth(c, schema, 100)
      return {
        enqueued,
        first,
        next,
        beat,
        beats,
        dead,
        along,
        units,
        released,
        stale,
        freed,
        releasedOwner,
        last,
        idle,
        pruned,
        depth,
        letters: yield* DeadLetters.list(schema, { _tag: "All" }, 10),
        counts: yield* DeadLetters.counts(schema),
        replayed: yield* DeadLetters.replay(schema, { _tag: "All" })
      }
    })
  )
})

for (const driver of ["pg", "postgres"] as const) {
  const Database = TestSession.layer(DbSession.layer, { applicationName: `row-schemas-${driver}`, driver }).pipe(
    Layer.orDie
  )
  layer(Database, { excludeTestServices: true })(`Row schemas (PostgreSQL, ${driver})`, (it) => {
    it.effect("every statement's rows pass its schema and read as before", () =>
      Effect.gen(function*() {
        const r = yield* everyStatement
        assert.strictEqual(r.enqueued, 6)
        assert.deepStrictEqual(r.first.items.map((item) => [item.workUnitKey, item.payload, item.attempts]), [
          ["u1", { i: 1 }, 0],
          ["u1", { i: 2 }, 0]
        ])
        assert.deepStrictEqual(r.next.map((item) => item.payload), [{ i: 1 }, { i: 2 }])
        assert.isTrue(r.beat)
        assert.deepStrictEqual([...r.beats], [r.first.claim.id])
        assert.deepStrictEqual(r.dead, { owned: true, marked: 1 })
        assert.deepStrictEqual(r.along.recorded, { owned: true, marked: 1 })
        assert.deepStrictEqual(r.along.claimed.map(({ claim }) => claim.workUnitKey), ["u2"])
        assert.deepStrictEqual(r.units.recorded.get("u2"), { owned: true, marked: 2 })
        assert.deepStrictEqual(r.units.claimed.map(({ claim }) => claim.workUnitKey), ["u3"])
        assert.strictEqual(r.released, 1)
        assert.deepStrictEqual(r.stale.map(({ claim }) => claim.workUnitKey), ["u3"])
        assert.deepStrictEqual(r.freed, ["u3"])
        assert.strictEqual(r.releasedOwner, 1)
        assert.strictEqual(r.last.claim.workUnitKey, "u3", "the unit the cleanup and the release freed")
        assert.deepStrictEqual(r.idle.claimed, [])
        assert.isDefined(r.idle.nextAt, "the waiting unit's time")
        assert.isAbove(r.idle.nextAt!, Date.now())
        assert.strictEqual(r.pruned, 4, "the four processed items")
        assert.deepStrictEqual({ due: r.depth.due, waiting: r.depth.waiting }, { due: 1, waiting: 1 })
        assert.isNumber(r.depth.oldestDueAt)
        assert.deepStrictEqual(
          r.letters.map((letter) => [letter.workUnitKey, letter.payload, letter.attempts, letter.lastError]),
          [["u1", { i: 1 }, 1, "boom"]]
        )
        assert.isNumber(r.letters[0]!.deadAt)
        assert.deepStrictEqual([...r.counts], [["t", 1]])
        assert.strictEqual(r.replayed, 1)
      }))
  })
}

/** `connection` whose rows come back with `field` set to `value` (the real rows, one field of the wrong shape). */
const skewed = (connection: Connection, field: string, value: unknown): Connection => ({
  query: <Row>(sql: string, params?: ReadonlyArray<unknown>) =>
    Effect.map(
      connection.query<Record<string, unknown>>(sql, params),
      (rows) => rows.map((row) => field in row ? { ...row, [field]: value } : row) as unknown as ReadonlyArray<Row>
    )
})

/** A queue with {@link enqueueUnits}'s items and `u1` claimed by `a`. */
interface Prepared {
  readonly schema: SchemaName.SchemaName
  readonly connection: Connection
  readonly first: { readonly claim: Queue.Claim; readonly items: ReadonlyArray<Queue.Item> }
}

/** A function's effect on a prepared queue through the skewed connection `wrong` (a dead-letter one through a skewed `DbSession`). */
type Case = readonly [
  statement: string,
  field: string,
  value: unknown,
  expected: string,
  run: (wrong: Connection, queue: Prepared) => Effect.Effect<unknown, unknown, DbSession>
]

const itemsWith = (attempts: unknown) =>
  JSON.stringify([{ id: "1", task_type: "t", payload: {}, attempts, later: null }])

const cases: ReadonlyArray<Case> = [
  [
    "Queue.poll (queue_poll)",
    "id",
    42,
    `Expected string | null at ["id"]`,
    (w, q) => Queue.poll(w, q.schema, 1, "b", 10)
  ],
  ["Queue.poll (queue_poll)", "next_at", "tomorrow", `Expected a valid Date at ["next_at"]`, (w, q) =>
    Effect.andThen(
      Queue.poll(q.connection, q.schema, 5, "b", 10),
      Queue.poll(w, q.schema, 1, "b", 10)
    )],
  [
    "Queue.claimWithItems (queue_claim)",
    "items",
    "not json",
    "items: Expected JSON text",
    (w, q) => Queue.claimWithItems(w, q.schema, 1, "b", 10)
  ],
  [
    "Queue.claimWithItems (queue_claim)",
    "items",
    itemsWith("0"),
    `items: Expected number at [0]["attempts"]`,
    (w, q) => Queue.claim(w, q.schema, 1, "b")
  ],
  [
    "Queue.nextItems",
    "attempts",
    "0",
    `Expected number at ["attempts"]`,
    (w, q) => Queue.nextItems(w, q.schema, q.first.claim, 10)
  ],
  [
    "Queue.nextItems",
    "payload",
    "{",
    "payload: Expected JSON text",
    (w, q) => Queue.nextItems(w, q.schema, q.first.claim, 10)
  ],
  [
    "Queue.record (queue_record)",
    "owned",
    "yes",
    `Expected boolean at ["owned"]`,
    (w, q) => Queue.record(w, q.schema, q.first.claim, [{ item: q.first.items[0]!, error: "x", dead: true }], false)
  ],
  [
    "Queue.record (queue_record_done)",
    "marked",
    null,
    `Expected number at ["marked"]`,
    (w, q) => Queue.record(w, q.schema, q.first.claim, done(q.first.items), false)
  ],
  [
    "Queue.recordAndClaim (queue_record_done, queue_claim)",
    "items",
    itemsWith(1.5),
    `items: Expected an integer at [0]["attempts"]`,
    (w, q) => Queue.recordAndClaim(w, q.schema, q.first.claim, done(q.first.items), true, 1, 10)
  ],
  [
    "Queue.recordUnits (queue_record_units)",
    "work_unit_key",
    null,
    `Expected string at ["work_unit_key"]`,
    (w, q) =>
      Queue.recordUnits(
        w,
        q.schema,
        "a",
        [{ claim: q.first.claim, outcomes: done(q.first.items), release: true }],
        1,
        10
      )
  ],
  [
    "Queue.heartbeats",
    "id",
    2,
    `Expected string at ["id"]`,
    (w, q) => Queue.heartbeats(w, q.schema, "a", [q.first.claim])
  ],
  [
    "Queue.release",
    "?column?",
    "1",
    `Expected 1 at ["?column?"]`,
    (w, q) => Queue.release(w, q.schema, [q.first.claim])
  ],
  [
    "Queue.releaseOwner",
    "?column?",
    null,
    `Expected 1 at ["?column?"]`,
    (w, q) => Queue.releaseOwner(w, q.schema, "a")
  ],
  [
    "Enqueue.enqueue",
    "n",
    "1",
    `Expected number at ["n"]`,
    (w, q) => Enqueue.enqueue(w, q.schema, [{ workUnitKey: "u9", taskType: "t", payload: {} }])
  ],
  [
    "Maintenance.cleanupStale",
    "work_unit_key",
    7,
    `Expected string at ["work_unit_key"]`,
    (w, q) => Maintenance.cleanupStale(w, q.schema, 0)
  ],
  ["Maintenance.pruneHistory", "?column?", true, `Expected 1 at ["?column?"]`, (w, q) =>
    Effect.andThen(
      Queue.record(q.connection, q.schema, q.first.claim, done(q.first.items), false),
      Maintenance.pruneHistory(w, q.schema, 0, 100)
    )],
  [
    "Maintenance.depth",
    "oldest_due_at",
    "soon",
    `Expected number | null at ["oldest_due_at"]`,
    (w, q) => Maintenance.depth(w, q.schema, 100)
  ],
  ...(
    [
      [
        "DeadLetters.list",
        "dead_at",
        null,
        `Expected number at ["dead_at"]`,
        (schema) => DeadLetters.list(schema, { _tag: "All" }, 10)
      ],
      ["DeadLetters.counts", "n", 1n, `Expected number at ["n"]`, DeadLetters.counts],
      [
        "DeadLetters.replay",
        "?column?",
        0,
        `Expected 1 at ["?column?"]`,
        (schema) => DeadLetters.replay(schema, { _tag: "All" })
      ]
    ] as const satisfies ReadonlyArray<
      readonly [
        string,
        string,
        unknown,
        string,
        (schema: SchemaName.SchemaName) => Effect.Effect<unknown, DbError, DbSession>
      ]
    >
  ).map((
    [statement, field, value, expected, f]
  ): Case => [statement, field, value, expected, (_, q) =>
    Effect.gen(function*() {
      const db = yield* DbSession
      yield* Queue.record(
        q.connection,
        q.schema,
        q.first.claim,
        [{ item: q.first.items[0]!, error: "x", dead: true }],
        false
      )
      const session = DbSession.of({
        ...db,
        withConnection: (use) => db.withConnection((c) => use(skewed(c, field, value)))
      })
      const run: Effect.Effect<unknown, DbError, DbSession> = f(q.schema)
      return yield* run.pipe(Effect.provideService(DbSession, session))
    })]
  )
]

describe("Row schemas: a row of the wrong shape", () => {
  layer(TestSession.layer(DbSession.layer, { applicationName: "row-schemas-wrong" }).pipe(Layer.orDie), {
    excludeTestServices: true
  })(
    "(PostgreSQL)",
    (it) => {
      for (const [statement, field, value, expected, run] of cases) {
        it.effect(`${statement}: ${field} = ${JSON.stringify(value, (_, v) => typeof v === "bigint" ? `${v}n` : v)}`, () =>
          Effect.gen(function*() {
            const schema = yield* freshSchema
            const db = yield* DbSession
            const error = yield* db.withConnection((connection) =>
              Effect.gen(function*() {
                yield* enqueueUnits(connection, schema)
                const first = yield* claimFirst(connection, schema)
                return yield* Effect.flip(run(skewed(connection, field, value), { schema, connection, first }))
              })
            )
            assert.strictEqual((error as { _tag?: string })._tag, "QueryFailed")
            const { code, message } = error as { code: unknown; message: string }
            assert.isUndefined(code, "no SQLSTATE: the server did not refuse it")
            assert.strictEqual(message, `${statement} returned a row of the wrong shape: ${expected}`)
          }))
      }

      it.effect("a server function that returns another shape: queue_poll's items with ids as numbers", () =>
        Effect.gen(function*() {
          const schema = yield* freshSchema
          const db = yield* DbSession
          yield* db.query(
            `CREATE OR REPLACE FUNCTION ${names(schema).poll}(integer, text, integer, float8)
  RETURNS TABLE (work_unit_key text, id text, items text, next_at timestamptz) LANGUAGE sql
AS $$ SELECT 'u'::text, '1'::text, json_build_array(json_build_object('id', 1, 'task_type', 't', 'payload', '{}'::json,
  'attempts', 0, 'later', NULL))::text, NULL::timestamptz $$`
          )
          const error = yield* Effect.flip(db.withConnection((c) => Queue.poll(c, schema, 1, "a", 10)))
          assert.strictEqual(error._tag, "QueryFailed")
          assert.strictEqual(
            error.message,
            `Queue.poll (queue_poll) returned a row of the wrong shape: items: Expected string at [0]["id"]`
          )
        }))
    }
  )
})
