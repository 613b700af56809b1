/** The domain against real PostgreSQL, and a round trip through a real deriver. */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig } from "@resilience/deriver"
import { SchemaName } from "@resilience/schema"
import { Eventually, TestDatabase } from "@resilience/test-db"
import { Effect, Exit, Layer, Option, References, Scope } from "effect"
import { Domain, Messages, QueueStatus, Representations, Workspaces } from "../src/index.ts"
import * as Names from "../src/Names.ts"
import * as RepresentationTask from "../src/RepresentationTask.ts"

const Database = TestDatabase.layerWith((database) =>
  DbSession.layer({
    url: database.url,
    connectTimeout: "2 seconds",
    poolClass: "queue",
    poolSize: 8,
    driver: "pg"
  })
).pipe(
  Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error"))
)

const schema = SchemaName.makeUnsafe("tenant_domain")

/** The status of a workspace with nothing in the queue; a test's expected status names what differs from it. */
const noItems = { pending: 0, inProgress: 0, waiting: 0, dead: 0, processed: 0, errored: 0 }

const queue = SchemaName.qualify(schema, "queue")

/** Inserts queue items of `workspace`: `rows` lists each item's values for the columns named, its payload `$1`. */
const insertItems = (workspace: string, columns: string, rows: string) =>
  DbSession.use((db) =>
    db.query(`INSERT INTO ${queue} (work_unit_key, task_type, payload, ${columns}) VALUES ${rows}`, [
      JSON.stringify({ workspace })
    ])
  )

const runDeriverUntilIdle = Effect.gen(function*() {
  const config = yield* Effect.orDie(DeriverConfig.make({
    workers: 4,
    pollingSleepIntervalSeconds: 0.02,
    pollingSleepMaxIntervalSeconds: 0.1,
    pollingStartupJitterSeconds: 0
  }))
  const scope = yield* Scope.make()
  yield* Scope.provide(Deriver.start({ schema, handlers: Domain.handlers(schema), config }), scope)
  yield* Eventually.satisfying(
    "the deriver's drain of acme's queue",
    QueueStatus.forWorkspace(schema, "acme"),
    (status) => status.pending === 0 && status.inProgress === 0,
    { every: "25 millis" }
  )
  yield* Scope.close(scope, Exit.void)
})

layer(Database, { excludeTestServices: true })("Domain (PostgreSQL)", (it) => {
  it.effect("migrates the queue and the domain in one run, idempotently and concurrently", () =>
    Effect.gen(function*() {
      yield* Effect.all([Domain.migrate(schema), Domain.migrate(schema), Domain.migrate(schema)], {
        concurrency: "unbounded"
      })
      yield* Domain.migrate(schema)
      const db = yield* DbSession
      const tables = yield* db.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
        [schema]
      )
      assert.deepStrictEqual(tables.map((t) => t.table_name), [
        "active_queue_sessions",
        "idempotency_keys",
        "message_seq",
        "messages",
        "peer_representations",
        "peer_session_progress",
        "peer_terms",
        "queue",
        "queue_counts",
        "resilience_migrations",
        "sessions",
        "workspaces"
      ])
    }))

  it.effect("creates workspaces with a token stored only as a hash, and verifies tokens", () =>
    Effect.gen(function*() {
      yield* Domain.migrate(schema)
      const created = yield* Workspaces.create(schema, "acme")
      assert.strictEqual(created.name, "acme")
      assert.isTrue(created.token.length >= 40)
      const again = yield* Effect.flip(Workspaces.create(schema, "acme"))
      assert.instanceOf(again, Workspaces.WorkspaceExists)
      const db = yield* DbSession
      const stored = yield* db.query<{ token_hash: string }>(
        `SELECT token_hash FROM ${SchemaName.qualify(schema, "workspaces")} WHERE name = 'acme'`
      )
      assert.notInclude(stored[0]!.token_hash, created.token)
      assert.strictEqual(stored[0]!.token_hash, Workspaces.hashToken(created.token))
      assert.strictEqual(yield* Workspaces.verifyToken(schema, "acme", created.token), "ok")
      assert.strictEqual(yield* Workspaces.verifyToken(schema, "acme", "ws_wrong"), "forbidden")
      assert.strictEqual(yield* Workspaces.verifyToken(schema, "nobody", created.token), "not-found")
      assert.isTrue(yield* Workspaces.exists(schema, "acme"))
      assert.isFalse(yield* Workspaces.exists(schema, "nobody"))
    }))

  it.effect("appends messages and enqueues one representation task per peer in the same transaction", () =>
    Effect.gen(function*() {
      const appended = yield* Messages.append(schema, "acme", "s1", [
        { peer: "alice", content: "I love hiking in the mountains" },
        { peer: "bob", content: "Mountains are cold" },
        { peer: "alice", content: "Hiking boots and mountains" }
      ])
      assert.deepStrictEqual(appended, { stored: 3, enqueued: 2 })
      assert.deepStrictEqual(yield* QueueStatus.forWorkspace(schema, "acme"), { ...noItems, pending: 2 })
      // A message for a workspace that does not exist stores nothing and enqueues nothing.
      const failed = yield* Effect.flip(Messages.append(schema, "ghost", "s1", [{ peer: "x", content: "y" }]))
      assert.strictEqual(failed._tag, "QueryFailed")
      assert.deepStrictEqual(yield* QueueStatus.forWorkspace(schema, "ghost"), noItems)
    }))

  it.effect("status counts processed and errored items once each, and keeps them when history is pruned", () =>
    Effect.gen(function*() {
      const db = yield* DbSession
      // Inserted already processed (one errored), then three processed by one update, then one updated again.
      const items =
        `('c', 't', $1::jsonb, true, NULL), ('c', 't', $1::jsonb, true, 'boom'), ('c', 't', $1::jsonb, false, NULL),
        ('c', 't', $1::jsonb, false, NULL), ('c', 't', $1::jsonb, false, 'boom')`
      yield* insertItems("counted", "processed, error", items)
      yield* db.query(
        `UPDATE ${queue} SET processed = true WHERE payload ->> 'workspace' = 'counted' AND NOT processed`
      )
      yield* db.query(`UPDATE ${queue} SET error = error WHERE payload ->> 'workspace' = 'counted'`)
      const expected = { pending: 0, inProgress: 0, waiting: 0, dead: 0, processed: 3, errored: 2 }
      assert.deepStrictEqual(yield* QueueStatus.forWorkspace(schema, "counted"), expected)
      yield* db.query(`DELETE FROM ${queue} WHERE payload ->> 'workspace' = 'counted'`)
      assert.deepStrictEqual(yield* QueueStatus.forWorkspace(schema, "counted"), expected)
    }))

  it.effect("status counts items waiting for their time and dead letters apart from the pending ones", () =>
    Effect.gen(function*() {
      // one due at once, one whose retry time passed, one waiting for its retry, one dead letter
      const items = `('a', 't', $1::jsonb, NULL, NULL, 0), ('b', 't', $1::jsonb, now() - interval '1 minute', NULL, 1),
        ('c', 't', $1::jsonb, now() + interval '1 hour', NULL, 2), ('d', 't', $1::jsonb, 'infinity', now(), 15)`
      yield* insertItems("timed", "run_at, dead_at, attempts", items)
      assert.deepStrictEqual(yield* QueueStatus.forWorkspace(schema, "timed"), {
        ...noItems,
        pending: 2,
        waiting: 1,
        dead: 1
      })
    }))

  it.effect("round trip: a real deriver derives the representations the API reads", () =>
    Effect.gen(function*() {
      assert.isTrue(Option.isNone(yield* Representations.get(schema, "acme", "alice")))
      yield* runDeriverUntilIdle
      const alice = Option.getOrThrow(yield* Representations.get(schema, "acme", "alice"))
      assert.strictEqual(alice.messageCount, 2)
      assert.strictEqual(alice.sessionCount, 1)
      assert.deepStrictEqual(alice.topTerms.slice(0, 2), [{ term: "hiking", count: 2 }, {
        term: "mountains",
        count: 2
      }])
      assert.match(alice.firstSeen, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
      assert.isTrue(alice.firstSeen <= alice.lastSeen)
      const status = yield* QueueStatus.forWorkspace(schema, "acme")
      assert.deepStrictEqual(status, { pending: 0, inProgress: 0, waiting: 0, dead: 0, processed: 2, errored: 0 })

      // More messages in another session fold in; repeating a task adds nothing twice.
      yield* Messages.append(schema, "acme", "s2", [{ peer: "alice", content: "mountains again" }])
      yield* runDeriverUntilIdle
      yield* RepresentationTask.derive(schema, { workspace: "acme", session: "s2", peer: "alice" })
      const later = Option.getOrThrow(yield* Representations.get(schema, "acme", "alice"))
      assert.strictEqual(later.messageCount, 3)
      assert.strictEqual(later.sessionCount, 2)
      assert.deepStrictEqual(later.topTerms[0], { term: "mountains", count: 3 })
    }))

  it.effect("concurrent derivations of the same peer count every message exactly once", () =>
    Effect.gen(function*() {
      yield* Messages.append(
        schema,
        "acme",
        "s3",
        Array.from({ length: 50 }, (_, i) => ({ peer: "carol", content: `note ${i} about rivers` }))
      )
      const payload = { workspace: "acme", session: "s3", peer: "carol" }
      const folded = yield* Effect.all(Array.from({ length: 5 }, () => RepresentationTask.derive(schema, payload)), {
        concurrency: "unbounded"
      })
      assert.strictEqual(folded.reduce((a, b) => a + b, 0), 50)
      const carol = Option.getOrThrow(yield* Representations.get(schema, "acme", "carol"))
      assert.strictEqual(carol.messageCount, 50)
      assert.deepStrictEqual(carol.topTerms.find((t) => t.term === "rivers"), { term: "rivers", count: 50 })
    }))

  it.effect("a malformed task payload is a handler failure, not a defect", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        RepresentationTask.handler(schema)({
          id: "1",
          workUnitKey: "x",
          taskType: "representation",
          payload: { nope: 1 }
        })
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(exit), "InvalidPayload")
    }))
})

layer(Layer.empty)("Names", (it) => {
  it.effect("builds unambiguous unit keys", () =>
    Effect.sync(() => {
      assert.notStrictEqual(Names.representationUnit("w", "a:b", "c"), Names.representationUnit("w", "a", "b:c"))
    }))
})
