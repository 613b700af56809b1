/** The checker against real PostgreSQL: a clean run is valid; planted anomalies are each caught by kind. */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, Queue } from "@resilience/deriver"
import type { Queue as QueueItem } from "@resilience/deriver"
import { Domain, Messages, RepresentationTask, Terms, Workspaces } from "@resilience/domain"
import { SchemaName } from "@resilience/schema"
import { TestSession } from "@resilience/test-db"
import { Effect, Exit } from "effect"
import { Checker, History } from "../src/index.ts"

const Database = TestSession.layer(DbSession.layer)

const words = ["apples", "rivers", "mountains", "violins", "lanterns", "copper", "meadows", "harbors"]

/** A fresh schema with workspace `acme`. */
const freshSchema = (name: string) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(name)
    yield* Domain.migrate(schema)
    yield* Workspaces.create(schema, "acme")
    return schema
  })

/** A deriver that polls every 20–100 ms with 4 workers and no startup delay. */
const quick = { workers: 4, pollingSleepIntervalSeconds: 0.02, pollingSleepMaxIntervalSeconds: 0.1 } as const

/** Runs a deriver with `handlers` until no item of the history's workspaces is pending or in progress (≤ 20 s). */
const deriveUntilIdle = (
  schema: SchemaName.SchemaName,
  handlers: Handlers.Handlers<DbSession>,
  history: History.History
) =>
  Effect.scoped(Effect.gen(function*() {
    const config = yield* Effect.orDie(DeriverConfig.make({ ...quick, pollingStartupJitterSeconds: 0 }))
    yield* Deriver.start({ schema, handlers, config })
    yield* Checker.settle(schema, history, "20 seconds")
  }))

/** `clients` clients each appending `each` single-message requests to session s1, peer alice; recorded. */
const workload = (schema: SchemaName.SchemaName, history: History.History, clients: number, each: number) =>
  Effect.forEach(
    Array.from({ length: clients }, (_, c) => c),
    (c) =>
      Effect.forEach(Array.from({ length: each }, (_, i) => i), (i) => {
        const content = `c${c} m${i} ${words[(c + i) % words.length]} ${words[(c * 3 + i) % words.length]}`
        return History.record(
          history,
          { client: `c${c}`, workspace: "acme", session: "s1", peer: "alice", content },
          Messages.append(schema, "acme", "s1", [{ peer: "alice", content }])
        )
      }),
    { concurrency: "unbounded", discard: true }
  )

/** Every 100th message of a (session, peer), folded by the real handler and then taken out again. */
const skipEvery100th = (schema: SchemaName.SchemaName): Handlers.Handlers<DbSession> => {
  const skipped = new Set<string>()
  const real = RepresentationTask.handler(schema)
  const t = (name: string) => SchemaName.qualify(schema, name)
  return Handlers.make({
    [Messages.representationTask]: (item: QueueItem.Item) =>
      Effect.gen(function*() {
        yield* real(item)
        const { peer, session, workspace } = item.payload as RepresentationTask.Payload
        const db = yield* DbSession
        const folded = yield* db.query<{ seq: string; content: string }>(
          `SELECT m.seq::text AS seq, m.content FROM ${t("messages")} m
           JOIN ${t("peer_session_progress")} p USING (workspace, session, peer)
           WHERE m.workspace = $1 AND m.session = $2 AND m.peer = $3 AND m.seq % 100 = 0 AND m.seq <= p.last_seq`,
          [workspace, session, peer]
        )
        for (const row of folded.filter((r) => !skipped.has(`${workspace}/${session}/${peer}/${r.seq}`))) {
          skipped.add(`${workspace}/${session}/${peer}/${row.seq}`)
          yield* db.query(
            `UPDATE ${
              t("peer_representations")
            } SET message_count = message_count - 1 WHERE workspace = $1 AND peer = $2`,
            [workspace, peer]
          )
          for (const [term, count] of Terms.count([row.content])) {
            yield* db.query(
              `UPDATE ${t("peer_terms")} SET count = count - $4 WHERE workspace = $1 AND peer = $2 AND term = $3`,
              [workspace, peer, term, count]
            )
          }
        }
      })
  })
}

const zero = Object.fromEntries(Checker.kinds.map((kind) => [kind, 0])) as Record<Checker.Kind, number>

layer(Database, { excludeTestServices: true })("Checker (PostgreSQL)", (it) => {
  it.effect("a clean run with Idempotency-Key retries and a refused reuse is valid, every count zero", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema("checker_clean")
      const history = History.make()
      yield* workload(schema, history, 4, 10)
      // One logical write sent three times with one key (its retries): one operation, stored once.
      const keyed = { client: "k", workspace: "acme", session: "s2", peer: "bob", content: "keyed lanterns" }
      const once = Messages.appendOnce(schema, "acme", "s2", [{ peer: "bob", content: keyed.content }], {
        key: "key-1",
        retentionSeconds: 60
      })
      yield* History.record(history, keyed, Effect.andThen(Effect.andThen(once, once), once))
      // The same key with another body: refused (422), nothing stored.
      const reused = { ...keyed, content: "another body" }
      yield* History.record(
        history,
        reused,
        Messages.appendOnce(schema, "acme", "s2", [{ peer: "bob", content: reused.content }], {
          key: "key-1",
          retentionSeconds: 60
        }),
        (exit) => Exit.isSuccess(exit) ? "acknowledged" : "refused"
      ).pipe(Effect.flip)
      yield* deriveUntilIdle(schema, Domain.handlers(schema), history)
      const verdict = yield* Checker.check(schema, history)
      console.log(`clean run\n${Checker.table(verdict)}`)
      assert.deepStrictEqual(verdict.counts, zero)
      assert.deepStrictEqual(
        [verdict.totals.acknowledged, verdict.totals.refused, verdict.totals.stored, verdict.totals.counted],
        [41, 1, 41, 41]
      )
    }))

  it.effect("planted anomalies are each caught by their kind, with their amounts", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema("checker_planted")
      const t = (name: string) => SchemaName.qualify(schema, name)
      const db = yield* DbSession
      const history = History.make()
      yield* workload(schema, history, 2, 5)
      const acknowledged = (content: string, peer = "alice", session = "s1") =>
        history.complete(history.invoke({ client: "p", workspace: "acme", session, peer, content }), "acknowledged")
      const store = (content: string, peer = "alice", session = "s1") =>
        Messages.append(schema, "acme", session, [{ peer, content }])
      // lost: acknowledged, never stored.
      acknowledged("never stored")
      // duplicated: acknowledged once, stored twice.
      acknowledged("stored twice")
      yield* store("stored twice")
      yield* store("stored twice")
      // refused-stored: refused, yet stored.
      history.complete(
        history.invoke({ client: "p", workspace: "acme", session: "s1", peer: "alice", content: "refused" }),
        "refused"
      )
      yield* store("refused")
      // unrecorded: stored by nobody in the history.
      yield* store("nobody wrote this")
      // an item whose payload its handler rejects: errored.
      yield* db.transaction((connection) =>
        Queue.enqueue(connection, schema, [{
          workUnitKey: "bad",
          taskType: Messages.representationTask,
          payload: { workspace: "acme" }
        }])
      )
      yield* deriveUntilIdle(schema, Domain.handlers(schema), history)
      // bob (s2): two messages derived, then a third numbered 5 (a gap of two, the counter left at 2), and his
      // representation counting 4: folded twice, once. carol: counted one too few, one term one too many.
      for (const content of ["copper", "meadows"]) {
        acknowledged(content, "bob", "s2")
        yield* store(content, "bob", "s2")
      }
      acknowledged("carol harbors", "carol")
      yield* store("carol harbors", "carol")
      yield* deriveUntilIdle(schema, Domain.handlers(schema), history)
      acknowledged("zz", "bob", "s2")
      yield* db.query(
        `INSERT INTO ${t("messages")} (workspace, session, peer, content, seq) VALUES ('acme', 's2', 'bob', 'zz', 5)`
      )
      yield* db.query(`UPDATE ${t("peer_representations")} SET message_count = message_count + 2 WHERE peer = 'bob'`)
      yield* db.query(`UPDATE ${t("peer_representations")} SET message_count = message_count - 1 WHERE peer = 'carol'`)
      yield* db.query(`UPDATE ${t("peer_terms")} SET count = count + 1 WHERE peer = 'carol' AND term = 'harbors'`)
      // unprocessed: dave's item, never run (his representation planted, so only the queue is off).
      acknowledged("zz", "dave", "s3")
      yield* store("zz", "dave", "s3")
      yield* db.query(
        `INSERT INTO ${t("peer_representations")} (workspace, peer, message_count, session_count, first_seen, last_seen)
         VALUES ('acme', 'dave', 1, 1, now(), now())`
      )
      // non-owner completion: carol's item marked outside any claim; bob's last item marked after his unit's
      // earlier item by a claim (0) older than that item's.
      const [outside] = yield* db.query<{ id: string }>(
        `UPDATE ${t("queue")} SET processed_claim = NULL
         WHERE id = (SELECT min(id) FROM ${t("queue")} WHERE work_unit_key LIKE '%carol%') RETURNING id::text AS id`
      )
      yield* db.query(
        `UPDATE ${t("queue")} SET processed_claim = 0, processed_at = clock_timestamp()
         WHERE id = (SELECT max(id) FROM ${t("queue")} WHERE work_unit_key LIKE '%bob%')`
      )
      // a dead letter: an item whose handler ran out of attempts (neither lost nor processed).
      yield* db.transaction((connection) =>
        Queue.enqueue(connection, schema, [{
          workUnitKey: "dead",
          taskType: Messages.representationTask,
          payload: { workspace: "acme" }
        }])
      )
      yield* db.query(
        `UPDATE ${t("queue")} SET dead_at = now(), run_at = 'infinity', attempts = 15, last_error = 'provider 503'
         WHERE work_unit_key = 'dead'`
      )
      const verdict = yield* Checker.reconcile(schema, history)
      console.log(`planted anomalies\n${Checker.table(verdict)}`)
      assert.isFalse(verdict.valid)
      assert.deepStrictEqual(verdict.counts, {
        lost: 1,
        duplicated: 1,
        "refused-stored": 1,
        unrecorded: 1,
        unfolded: 1,
        "folded-twice": 1,
        "terms-mismatch": 1,
        "sequence-gap": 3,
        unprocessed: 1,
        "dead-letter": 1,
        errored: 1,
        "non-owner-completion": 2
      })
      assert.isTrue(verdict.anomalies.some((a) => a.subject.includes(`item ${outside?.id}`)))
      const failed = yield* Effect.flip(Checker.check(schema, history))
      assert.instanceOf(failed, Checker.Inconsistent)
      assert.include(failed.message, "valid? false")
    }))

  it.effect("a handler that skips every 100th message is caught: unfolded 2 of 200, terms off", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema("checker_skip")
      const history = History.make()
      yield* workload(schema, history, 4, 50)
      yield* deriveUntilIdle(schema, skipEvery100th(schema), history)
      const verdict = yield* Checker.reconcile(schema, history)
      console.log(`planted defect: a handler that skips every 100th message\n${Checker.table(verdict)}`)
      assert.isFalse(verdict.valid)
      assert.strictEqual(verdict.counts.unfolded, 2)
      assert.isAbove(verdict.counts["terms-mismatch"], 0)
      assert.deepStrictEqual(
        { ...verdict.counts, unfolded: 0, "terms-mismatch": 0 },
        zero
      )
      assert.deepStrictEqual([verdict.totals.acknowledged, verdict.totals.stored, verdict.totals.counted], [
        200,
        200,
        198
      ])
    }))
})
