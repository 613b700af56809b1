/**
 * The app as a process: `node --conditions=@resilience/source apps/deriver/src/main.ts` against a real
 * PostgreSQL. Invalid configuration stops it at start; SIGTERM while units are in flight stops it within the
 * grace period with nothing lost and no ownership row left; a second run finishes the work exactly once (the
 * consistency checker's verdict).
 *
 * Issue #22: the SIGTERM run was 12,000 messages (20 sessions × 3 peers × 200) in 60 units, and the four processes
 * ran without the compile cache (EntryPoint passes only PATH and HOME). Now 1,800 messages (12 × 3 × 50) in 36
 * units, and the processes get `NODE_COMPILE_CACHE`: the first run is still stopped with units held and items
 * pending (asserted: the second run has work left), the 4 workers still outnumbered nine to one.
 */
import { assert, layer } from "@effect/vitest"
import { Checker, History } from "@resilience/checker"
import { DbSession } from "@resilience/db-session"
import { Messages, Representations } from "@resilience/domain"
import { Cluster } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, EntryPoint, Eventually, TestDatabase, TestSession } from "@resilience/test-db"
import { Effect, Option } from "effect"
import { tenant } from "./support.ts"

const main = "apps/deriver/src/main.ts"

const Database = TestSession.layer(DbSession.layer, { poolSize: 4 })

/**
 * The deriver's entry point with `env` (and the run's compile cache); killed when the test's scope closes if it
 * is still running.
 */
const launch = (env: Record<string, string>) => EntryPoint.start(main, { ...EntryPoint.compileCache, ...env })

/** Polls `check` (a failed check counts as not yet: the database may be refusing) until it yields a value. */
const waitFor = <A>(what: string, check: Effect.Effect<A | undefined, unknown, DbSession>) =>
  Eventually.defined(what, Effect.orElseSucceed(check, () => undefined), { within: "60 seconds", every: "25 millis" })

const queueCounts = (schema: SchemaName.SchemaName) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    const rows = yield* db.query<{ total: number; processed: number; errored: number; owned: number }>(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE processed)::int AS processed,
              count(*) FILTER (WHERE error IS NOT NULL)::int AS errored,
              (SELECT count(*)::int FROM ${SchemaName.qualify(schema, "active_queue_sessions")}) AS owned
       FROM ${SchemaName.qualify(schema, "queue")}`
    )
    return rows[0]!
  })

layer(Database, { excludeTestServices: true, timeout: "180 seconds" })("apps/deriver (process)", (it) => {
  it.effect("an invalid setting stops the process at start, naming the variable and the range, before any database attempt", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      // Every connection attempt of the process goes through a counting proxy.
      const server = new URL(database.url)
      const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
      const env = { DATABASE_URL: proxy.url(database.url), DERIVER_METRICS_PORT: "0", DERIVER_MIGRATE: "true" }
      // A deriver setting (read last before this check existed, after the schema's readiness had started).
      const running = yield* launch({ ...env, DERIVER_POLLING_JITTER_RATIO: "1.5" })
      const exit = yield* Effect.promise(() => running.exited)
      assert.notStrictEqual(exit.code, 0)
      assert.include(running.output(), "DERIVER_POLLING_JITTER_RATIO")
      assert.include(running.output(), "[0, 1]")
      assert.strictEqual(yield* proxy.attempts, 0, "no connection attempt before the setting was rejected")
      // The control: the same process with a valid configuration does reach the database through the proxy.
      const valid = yield* launch({ ...env, DB_SCHEMA: "config_control" })
      yield* waitFor("a connection attempt", Effect.map(proxy.attempts, (n) => (n > 0 ? n : undefined)))
      valid.child.kill("SIGTERM")
      yield* Effect.promise(() => valid.exited)
    }))

  it.effect("SIGTERM while units are in flight: exits within the grace period, nothing lost, no ownership row", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const schema = yield* tenant("app_tenant")
      const sessions = 12
      const peers = ["alice", "bob", "carol"]
      const perPeer = 50
      const history = History.make()
      for (let s = 0; s < sessions; s++) {
        const messages = Array.from(
          { length: perPeer },
          (_, i) =>
            peers.map((peer) => ({ peer, content: `message ${i} about apples bananas and cherries from ${peer}` }))
        ).flat()
        const session = `session-${s}`
        yield* History.recordAll(
          history,
          messages.map((m) => ({ client: "setup", workspace: "acme", session, ...m })),
          Messages.append(schema, "acme", session, messages)
        )
      }
      const port = yield* Cluster.freePort
      const env = {
        DATABASE_URL: database.url,
        DB_SCHEMA: schema,
        DB_POOL_CLASS: "null",
        DERIVER_MIGRATE: "true",
        DERIVER_WORKERS: "4",
        DERIVER_POLLING_SLEEP_INTERVAL_SECONDS: "0.05",
        DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "0.5",
        DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
        DERIVER_SHUTDOWN_GRACE_SECONDS: "5",
        DERIVER_METRICS_PORT: String(port)
      }
      const first = yield* launch(env)
      // Wait until the deriver is mid-way: some units done, some held right now.
      yield* waitFor(
        "units in flight",
        Effect.map(queueCounts(schema), (c) => (c.processed >= 2 && c.owned > 0 ? c : undefined))
      )
      const metrics = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text()))
      assert.include(metrics, "deriver_polls_total")
      assert.include(metrics, "deriver_items_processed_total")
      // A live loop says so on /healthz (a loop that died of a defect answers 503 and the process exits non-zero).
      const health = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/healthz`).then(async (r) => ({ status: r.status, body: await r.json() }))
      )
      assert.deepStrictEqual(health, { status: 200, body: { status: "ok" } })
      const signalledAt = Date.now()
      first.child.kill("SIGTERM")
      const exit = yield* Effect.promise(() => first.exited)
      const stoppedIn = exit.at - signalledAt
      assert.isBelow(stoppedIn, 5000 + 2000, `stopped in ${stoppedIn} ms`)
      const afterFirst = yield* queueCounts(schema)
      assert.strictEqual(afterFirst.owned, 0, "no ownership row remains")
      assert.strictEqual(afterFirst.errored, 0)
      assert.strictEqual(afterFirst.total, sessions * peers.length, "no item was deleted")
      assert.isBelow(afterFirst.processed, afterFirst.total, "the SIGTERM landed with items pending")
      assert.notInclude(first.output(), "interrupting in-flight units", "in-flight units finished within the grace")
      // Logs are JSON lines.
      const lines = first.output().split("\n").filter((line) => line.trim() !== "")
      assert.isTrue(lines.length > 0 && lines.every((line) => line.startsWith("{")), first.output().slice(0, 500))

      // A second run finishes the rest; every peer's representation counts each message exactly once.
      const second = yield* launch(env)
      yield* waitFor(
        "the rest of the queue",
        Effect.map(queueCounts(schema), (c) => (c.processed === c.total ? c : undefined))
      )
      second.child.kill("SIGTERM")
      yield* Effect.promise(() => second.exited)
      for (const peer of peers) {
        const representation = yield* Representations.get(schema, "acme", peer)
        assert.isTrue(Option.isSome(representation))
        const value = Option.getOrThrow(representation)
        assert.strictEqual(value.messageCount, sessions * perPeer, peer)
        assert.strictEqual(value.sessionCount, sessions, peer)
        assert.deepStrictEqual(
          value.topTerms.slice(0, 5).map((t) => t.term).sort(),
          ["apples", "bananas", "cherries", "message", peer].sort()
        )
        assert.strictEqual(value.topTerms[0]!.count, sessions * perPeer)
      }
      assert.strictEqual((yield* queueCounts(schema)).owned, 0)
      // The checker: every message stored once and folded once across the SIGTERM and the restart.
      const verdict = yield* Checker.reconcile(schema, history)
      console.log(`[checker] deriver SIGTERM mid-run, then a second run\n${Checker.table(verdict)}`)
      assert.isTrue(verdict.valid)
    }))
})
