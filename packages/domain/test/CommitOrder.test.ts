/**
 * Issue #21: an append that commits after a later one was folded in must still be folded in. The test forces the
 * commit order on two real connections: append A stores its message and holds its transaction open; append B
 * (a later message of the same session and peer) runs; the deriver folds what it sees; then A commits.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { QueueSchema } from "@resilience/deriver"
import { Migrator, SchemaName } from "@resilience/schema"
import { Eventually, TestDatabase } from "@resilience/test-db"
import { Deferred, Effect, Fiber, Layer, Option, References } from "effect"
import * as DomainSchema from "../src/DomainSchema.ts"
import { Domain, Messages, Representations, Workspaces } from "../src/index.ts"
import * as RepresentationTask from "../src/RepresentationTask.ts"

const Database = TestDatabase.layerWith((database) =>
  DbSession.layer({ url: database.url, connectTimeout: "2 seconds", poolClass: "queue", poolSize: 8, driver: "pg" })
).pipe(Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error")))

const schema = SchemaName.makeUnsafe("tenant_commit_order")
const payload = { workspace: "acme", session: "s1", peer: "alice" }

/** Done, or waiting on a lock held by another backend of this database (B behind A, if appends serialise). */
const settled = (b: Fiber.Fiber<unknown, unknown>) =>
  Eventually.defined(
    "append B to commit or to wait on a lock",
    Effect.gen(function*() {
      if (b.pollUnsafe() !== undefined) return "committed" as const
      const db = yield* DbSession
      const waiting = yield* db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'`
      )
      return (waiting[0]?.n ?? 0) > 0 ? "waiting" as const : undefined
    }),
    { every: "10 millis" }
  )

layer(Database, { excludeTestServices: true })("commit order (PostgreSQL)", (it) => {
  it.effect("an append committing after a later one was folded in is still folded in, exactly once", () =>
    Effect.gen(function*() {
      yield* Domain.migrate(schema)
      yield* Workspaces.create(schema, "acme")
      // The session exists already (its first append would make the next one wait on the new session's row).
      yield* Messages.append(schema, "acme", "s1", [{ peer: "bob", content: "hello" }])
      const db = yield* DbSession
      const stored = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      // A: stores "ripe apples" (the lower id) and holds its transaction open until told to commit.
      const a = yield* Effect.forkChild(db.transaction((connection) =>
        Effect.andThen(
          Messages.store(connection, schema, "acme", "s1", [{ peer: "alice", content: "ripe apples" }]),
          Effect.andThen(Deferred.succeed(stored, undefined), Deferred.await(commit))
        )
      ))
      yield* Deferred.await(stored)
      // B: a later message of the same session and peer, in its own transaction.
      const b = yield* Effect.forkChild(
        Messages.append(schema, "acme", "s1", [{ peer: "alice", content: "green pears" }])
      )
      const bState = yield* settled(b)
      // The deriver folds what is committed now: B's message when B could commit before A.
      const foldedWhileOpen = yield* RepresentationTask.derive(schema, payload)
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(a)
      yield* Fiber.join(b)
      const foldedAfter = yield* RepresentationTask.derive(schema, payload)
      const again = yield* RepresentationTask.derive(schema, payload)
      const alice = Option.getOrThrow(yield* Representations.get(schema, "acme", "alice"))
      assert.deepStrictEqual(
        { bState, folded: foldedWhileOpen + foldedAfter, again, messageCount: alice.messageCount },
        { bState, folded: 2, again: 0, messageCount: 2 }
      )
      assert.deepStrictEqual(alice.topTerms.map((t) => t.term).sort(), ["apples", "green", "pears", "ripe"])
    }))

  it.effect("the sequence migration numbers existing messages per peer and carries the folded ones over", () =>
    Effect.gen(function*() {
      const old = SchemaName.makeUnsafe("tenant_before_seq")
      const t = (name: string) => SchemaName.qualify(old, name)
      yield* Migrator.run(old, [QueueSchema.component, {
        name: "domain",
        migrations: DomainSchema.migrations.filter((m) => m.version <= 5)
      }])
      const db = yield* DbSession
      yield* db.query(`INSERT INTO ${t("workspaces")} (name, token_hash) VALUES ('acme', 'x')`)
      yield* db.query(`INSERT INTO ${t("sessions")} (workspace, name) VALUES ('acme', 's1')`)
      yield* db.query(
        `INSERT INTO ${t("messages")} (workspace, session, peer, content)
         VALUES ('acme', 's1', 'alice', 'one'), ('acme', 's1', 'bob', 'two'), ('acme', 's1', 'alice', 'three apples')`
      )
      // The id watermark had folded alice's first message.
      yield* db.query(
        `INSERT INTO ${t("peer_session_progress")} (workspace, session, peer, last_message_id)
         SELECT workspace, session, peer, min(id) FROM ${t("messages")} WHERE peer = 'alice' GROUP BY 1, 2, 3`
      )
      yield* Domain.migrate(old)
      const seqs = yield* db.query<{ peer: string; seq: string }>(
        `SELECT peer, seq::text AS seq FROM ${t("messages")} ORDER BY id`
      )
      const progress = yield* db.query<{ last_seq: string }>(`SELECT last_seq::text FROM ${t("peer_session_progress")}`)
      yield* Messages.append(old, "acme", "s1", [{ peer: "alice", content: "four pears" }])
      const folded = yield* RepresentationTask.derive(old, payload)
      const stored = yield* db.query<{ seq: string }>(
        `SELECT seq::text AS seq FROM ${t("messages")} WHERE peer = 'alice' ORDER BY id`
      )
      assert.deepStrictEqual({ seqs, progress, folded, stored: stored.map((r) => r.seq) }, {
        seqs: [{ peer: "alice", seq: "1" }, { peer: "bob", seq: "1" }, { peer: "alice", seq: "2" }],
        progress: [{ last_seq: "1" }],
        folded: 2,
        stored: ["1", "2", "3"]
      })
    }))
})
