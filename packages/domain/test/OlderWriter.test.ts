/**
 * Issue #36: a writer built before domain migration 6 inserts messages without `seq`. Up to migration 6 the
 * NOT NULL column refuses it (23502); from migration 7 the row takes the next number of its (session, peer)
 * counter, interleaved with the current appends, and the representation counts every message once.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Queue } from "@resilience/deriver"
import { Migrator, SchemaName } from "@resilience/schema"
import { TestDatabase } from "@resilience/test-db"
import { Effect, Layer, Option, References } from "effect"
import * as DomainSchema from "../src/DomainSchema.ts"
import { Domain, Messages, Representations, Workspaces } from "../src/index.ts"
import * as Names from "../src/Names.ts"
import * as RepresentationTask from "../src/RepresentationTask.ts"

const Database = TestDatabase.layerWith((database) =>
  DbSession.layer({ url: database.url, connectTimeout: "2 seconds", poolClass: "queue", poolSize: 8, driver: "pg" })
).pipe(Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error")))

/** What a writer built before migration 6 did: the session, the message without `seq`, its representation task. */
const olderAppend = (schema: SchemaName.SchemaName, peer: string, content: string) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    yield* db.transaction((connection) =>
      Effect.gen(function*() {
        yield* connection.query(
          `INSERT INTO ${SchemaName.qualify(schema, "sessions")} (workspace, name) VALUES ('acme', 's1')
           ON CONFLICT DO NOTHING`
        )
        yield* connection.query(
          `INSERT INTO ${SchemaName.qualify(schema, "messages")} (workspace, session, peer, content)
           VALUES ('acme', 's1', $1, $2)`,
          [peer, content]
        )
        yield* Queue.enqueue(connection, schema, [{
          workUnitKey: Names.representationUnit("acme", "s1", peer),
          taskType: Messages.representationTask,
          payload: { workspace: "acme", session: "s1", peer }
        }])
      })
    )
  })

layer(Database, { excludeTestServices: true })("a writer that does not number its messages (PostgreSQL)", (it) => {
  it.effect("is refused up to migration 6 and numbered from migration 7", () =>
    Effect.gen(function*() {
      const upTo6 = SchemaName.makeUnsafe("tenant_older_writer_6")
      const queue = Domain.components[0]!
      yield* Migrator.run(upTo6, [queue, {
        name: DomainSchema.component.name,
        migrations: DomainSchema.migrations.filter((m) => m.version <= 6)
      }])
      yield* Workspaces.create(upTo6, "acme")
      const refused = yield* Effect.flip(olderAppend(upTo6, "alice", "before the expand step"))
      assert.strictEqual(refused.code, "23502", refused.message)

      const schema = SchemaName.makeUnsafe("tenant_older_writer")
      yield* Domain.migrate(schema)
      yield* Workspaces.create(schema, "acme")
      const contents = Array.from({ length: 40 }, (_, i) => `message ${i} about ${i % 2 === 0 ? "apples" : "pears"}`)
      yield* Effect.forEach(contents, (content, i) =>
        i % 2 === 0
          ? olderAppend(schema, "alice", content)
          : Messages.append(schema, "acme", "s1", [{ peer: "alice", content }]), { concurrency: 8 })

      const db = yield* DbSession
      const seqs = yield* db.query<{ seq: string }>(
        `SELECT seq FROM ${SchemaName.qualify(schema, "messages")} WHERE peer = 'alice' ORDER BY seq`
      )
      assert.deepStrictEqual(seqs.map((row) => Number(row.seq)), contents.map((_, i) => i + 1))
      const counter = yield* db.query<{ last_seq: string }>(
        `SELECT last_seq FROM ${SchemaName.qualify(schema, "message_seq")} WHERE peer = 'alice'`
      )
      assert.strictEqual(Number(counter[0]?.last_seq), 40)

      assert.strictEqual(
        yield* RepresentationTask.derive(schema, { workspace: "acme", session: "s1", peer: "alice" }),
        40
      )
      const representation = yield* Representations.get(schema, "acme", "alice")
      assert.strictEqual(Option.getOrThrow(representation).messageCount, 40)
    }))
})
