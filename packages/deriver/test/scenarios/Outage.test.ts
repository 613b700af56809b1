/**
 * Two derivers through a managed PostgreSQL's restarts, against a dedicated cluster that is really stopped
 * (fast shutdown, as `pg_ctl restart -m fast`) and started again on the same data and port:
 *
 * - two fast restarts while draining;
 * - an outage longer than the stale-claim timeout, after which units are taken over.
 *
 * Counts items enqueued, processed, errored and handled more than once (a handler side-effect counter), and
 * audits every completion with a trigger: the unit's owner at that moment must be the deriver that completed
 * it (each deriver connects with its owner as `application_name`), i.e. no worker that lost its unit
 * completed an item of it.
 *
 * Issue #22: each scenario drained 150 items in 30 units (61 s of CPU for the file, ~75 % of it PostgreSQL:
 * ~290 fresh connections per scenario). The test's progress polls opened one each too (`Effect.provide` of a
 * layer builds it per run): the admin session is now built once.
 * Now 60 items in 12 units, still 5 per unit and twice the units of the six workers; the restarts come 300 ms
 * apart instead of 700 ms, so the fault still lands while units are held and ends with items pending (now
 * asserted for the restarts; the partition lets deriver-b drain, so there it is only printed).
 */
import { assert, describe, it } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Migrator } from "@resilience/schema"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, Eventually } from "@resilience/test-db"
import { Effect, Exit, Layer, References, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Deriver from "../../src/Deriver.ts"
import * as Handlers from "../../src/Handlers.ts"
import * as Queue from "../../src/Queue.ts"
import * as QueueSchema from "../../src/QueueSchema.ts"
import { testConfig } from "../support.ts"

const schema = SchemaName.makeUnsafe("tenant")
const t = (name: string) => SchemaName.qualify(schema, name)

const session = (url: string, applicationName: string, poolClass: "null" | "queue" = "null") =>
  DbSession.layer({ url, connectTimeout: "500 millis", poolClass, poolSize: 1, driver: "pg", applicationName })

/**
 * The audit of completions: who completed an item (application_name) and who owned its unit in that
 * transaction: the ownership row as of the commit, or, when the same statement released the unit (a drained
 * unit's last record deletes its row), the owner of the row it deleted. The completion trigger is a deferred
 * constraint trigger, so it runs at commit, after the release audit of the same statement.
 */
const auditSql = [
  // Ownership rows deleted, by whom (transaction) and how long they had gone without a heartbeat (a takeover:
  // longer than the stale timeout).
  `CREATE TABLE ${t("releases")} (work_unit_key text, owner text, silent_seconds float8, txid bigint)`,
  `CREATE FUNCTION ${t("audit_release")}() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO ${t("releases")}
       VALUES (OLD.work_unit_key, OLD.owner, extract(epoch FROM now() - OLD.last_updated), txid_current());
     RETURN OLD;
   END $$`,
  `CREATE TRIGGER audit_release AFTER DELETE ON ${t("active_queue_sessions")}
   FOR EACH ROW EXECUTE FUNCTION ${t("audit_release")}()`,
  `CREATE TABLE ${t("completions")} (item_id bigint NOT NULL, completed_by text, owner text)`,
  `CREATE FUNCTION ${t("audit_completion")}() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO ${t("completions")} SELECT NEW.id, current_setting('application_name'), coalesce(
       (SELECT owner FROM ${t("active_queue_sessions")} WHERE work_unit_key = NEW.work_unit_key),
       (SELECT owner FROM ${t("releases")} WHERE work_unit_key = NEW.work_unit_key AND txid = txid_current() LIMIT 1));
     RETURN NEW;
   END $$`,
  `CREATE CONSTRAINT TRIGGER audit_completion AFTER UPDATE OF processed ON ${t("queue")}
   DEFERRABLE INITIALLY DEFERRED
   FOR EACH ROW WHEN (NEW.processed AND NOT OLD.processed) EXECUTE FUNCTION ${t("audit_completion")}()`
]

interface Figures {
  readonly enqueued: number
  readonly processed: number
  readonly errored: number
  readonly handledMoreThanOnce: number
  readonly completedByNonOwner: number
  readonly completionsByDeriver: string
  /** Ownership rows freed by the stale cleanup (units taken over). */
  readonly takenOver: number
  /** Items not yet processed when the fault ended. */
  readonly pendingAfterFault: number
}

/** Work units of a scenario, 5 items each: twice the six workers, so units wait while all workers are busy. */
const units = 12

/**
 * Runs `fault` against two derivers draining 60 items in 12 units (5 per unit: a unit outlives a batch);
 * returns the figures once all is done. Each item is a checkout (the 30 ms handler outlasts the 20 ms record
 * flush), so the drain takes seconds and the fault lands while units are held and items pending
 * (`pendingAfterFault` in the printed figures).
 */
const scenario = (
  label: string,
  configInput: Parameters<typeof testConfig>[0],
  fault: (tools: {
    /** Stops the server (fast shutdown) and starts it again on the same data after `downMillis`. */
    readonly restart: (downMillis: number) => Effect.Effect<void>
    /** Cuts (or heals) the network between deriver-a and the server; deriver-b is not affected. */
    readonly cutA: (cut: boolean) => Effect.Effect<void>
  }) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    // Whatever way the scenario ends, the server stops and its directory goes (finalizers run last in, first out).
    const directory = yield* Effect.acquireRelease(
      Effect.sync(() => mkdtempSync(join(tmpdir(), "resilience-outage-"))),
      (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
    )
    const port = yield* Cluster.freePort
    const clusterScope = yield* Scope.make()
    yield* Effect.addFinalizer(() => Scope.close(clusterScope, Exit.void))
    const startCluster = Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(
        Scope.provide(Cluster.start({ directory, port, maxConnections: 30 }), scope),
        (cluster) => ({ cluster, scope })
      ))
    let running = yield* startCluster
    yield* Scope.addFinalizer(clusterScope, Effect.suspend(() => Scope.close(running.scope, Exit.void)))
    const url = running.cluster.url
    const restart = (downMillis: number) =>
      Effect.gen(function*() {
        yield* Scope.close(running.scope, Exit.void)
        yield* Effect.sleep(downMillis) // the outage itself: its length is the scenario
        running = yield* startCluster
      }).pipe(Effect.orDie)

    // The test's own queries (setup, the progress polls every 100 ms, the figures) keep one connection (a new
    // one after a restart): a connection per poll cost more CPU than the derivers' work. The session is built
    // once: `Effect.provide` of the layer itself would build a new pool, and open a connection, per query.
    const admin = yield* Layer.buildWithScope(session(url, "admin", "queue"), clusterScope)
    const enqueued = yield* Effect.gen(function*() {
      yield* Migrator.run(schema, [QueueSchema.component])
      const db = yield* DbSession
      for (const sql of auditSql) yield* db.query(sql)
      const items = Array.from({ length: 5 }, (_, round) =>
        Array.from({ length: units }, (_, u) => ({ workUnitKey: `unit-${u}`, taskType: "work", payload: { round } })))
        .flat()
      return yield* db.withConnection((c) =>
        Queue.enqueue(c, schema, items)
      )
    }).pipe(Effect.provide(admin))

    const handled = new Map<string, number>()
    const handler: Handlers.Handler = (item) =>
      Effect.gen(function*() {
        yield* Effect.sleep("30 millis") // the handler's own work, part of the scenario
        handled.set(item.id, (handled.get(item.id) ?? 0) + 1)
      })
    // Two units claimed beyond each deriver's 3 workers: both derivers hold units, so a fault on one leaves units
    // for the other to take over. With the default (8 per worker: 27 a deriver), the first deriver to poll takes all
    // 12 units and the other holds none.
    const config = yield* testConfig({ workers: 3, prefetch: 2, ...configInput })
    const staleSeconds = config.staleTimeoutMillis / 1000
    const derivers = yield* Scope.make()
    // deriver-a reaches the server through a proxy that can partition it away.
    const proxyA = yield* Scope.provide(CountingProxy.start({ host: running.cluster.host, port }), clusterScope)
    for (const owner of ["deriver-a", "deriver-b"]) {
      const context = yield* Layer.buildWithScope(
        session(owner === "deriver-a" ? proxyA.url(url) : url, owner),
        derivers
      )
      yield* Scope.provide(
        Deriver.start({ schema, handlers: Handlers.make({ work: handler }), config, owner }).pipe(
          Effect.provide(context)
        ),
        derivers
      )
    }
    // The fault starts while the derivers hold units.
    const held = Effect.gen(function*() {
      const db = yield* DbSession
      const rows = yield* db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t("active_queue_sessions")}`)
      return rows[0]?.n ?? 0
    }).pipe(Effect.provide(admin), Effect.orElseSucceed(() => 0))
    yield* Eventually.until("the derivers holding units", Effect.map(held, (n) => n > 0))
    yield* fault({ restart, cutA: proxyA.setCut })
    const pending = Effect.gen(function*() {
      const db = yield* DbSession
      const rows = yield* db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t("queue")} WHERE NOT processed`)
      return rows[0]?.n ?? -1
    }).pipe(Effect.provide(admin), Effect.orElseSucceed(() => -1))
    const pendingAfterFault = yield* pending
    yield* Eventually.satisfying("the drain after the fault", pending, (n) => n === 0, {
      within: "90 seconds",
      every: "100 millis"
    })
    yield* Scope.close(derivers, Exit.void)

    const figures = yield* Effect.gen(function*() {
      const db = yield* DbSession
      const one = (sql: string) => Effect.map(db.query<{ n: number }>(sql), (rows) => rows[0]?.n ?? -1)
      const byDeriver = yield* db.query<{ completed_by: string; n: number }>(
        `SELECT completed_by, count(*)::int AS n FROM ${t("completions")} GROUP BY 1 ORDER BY 1`
      )
      return {
        enqueued,
        processed: yield* one(`SELECT count(*)::int AS n FROM ${t("queue")} WHERE processed`),
        errored: yield* one(`SELECT count(*)::int AS n FROM ${t("queue")} WHERE error IS NOT NULL`),
        handledMoreThanOnce: [...handled.values()].filter((n) => n > 1).length,
        completedByNonOwner: yield* one(
          `SELECT count(*)::int AS n FROM ${t("completions")} WHERE owner IS DISTINCT FROM completed_by`
        ),
        completionsByDeriver: byDeriver.map((row) => `${row.completed_by}=${row.n}`).join(" "),
        takenOver: yield* one(
          `SELECT count(*)::int AS n FROM ${t("releases")} WHERE silent_seconds > ${staleSeconds}`
        ),
        pendingAfterFault
      } satisfies Figures
    }).pipe(Effect.provide(admin))
    console.log(`[figures] ${label}: ${JSON.stringify(figures)}`)
    return figures
  }).pipe(Effect.scoped, Effect.provideService(References.MinimumLogLevel, "Error"))

const assertNoWorkLost = (figures: Figures) => {
  assert.strictEqual(figures.processed, figures.enqueued, "every item processed")
  assert.strictEqual(figures.errored, 0, "no item marked with an error")
  assert.strictEqual(figures.completedByNonOwner, 0, "no item completed by a worker that did not own its unit")
}

/** The fault ended with items still pending: it landed in the middle of the drain, not after it. */
const assertPendingAfterFault = (figures: Figures) =>
  assert.isAbove(figures.pendingAfterFault, 0, "items were still pending when the fault ended")

/** Settings under which a unit without a heartbeat for 3 s is stale (cleanup every 0.5 s). */
const staleAfterThreeSeconds = {
  pollingSleepMaxIntervalSeconds: 0.5,
  staleSessionTimeoutMinutes: 0.05,
  staleWorkUnitCleanupIntervalSeconds: 0.5
}

/** Runs a scenario and asserts that no work was lost through it; returns its figures. */
const losesNoWork = (...args: Parameters<typeof scenario>) =>
  Effect.tap(scenario(...args), (figures) => Effect.sync(() => assertNoWorkLost(figures)))

const timeout = { timeout: 180_000 }

describe("Deriver through restarts and outages (dedicated cluster)", () => {
  it.live(
    "two fast restarts while draining: nothing lost, nothing errored",
    () =>
      losesNoWork(
        "two fast restarts",
        { pollingSleepMaxIntervalSeconds: 0.5 },
        ({ restart }) =>
          Effect.gen(function*() {
            // the faults' own rhythm, part of the scenario: 300 ms into the drain, and 300 ms after the first
            yield* Effect.sleep("300 millis")
            yield* restart(0)
            yield* Effect.sleep("300 millis")
            yield* restart(0)
          })
      ).pipe(Effect.tap((figures) => Effect.sync(() => assertPendingAfterFault(figures)))),
    timeout
  )

  // Whether a unit is taken over after recovery is a race between the stale cleanup and the owners' first
  // heartbeat (takeovers are what the heartbeat avoids); the figure is reported, the fencing itself is
  // asserted deterministically in Queue.test.ts.
  it.live(
    "an outage longer than the stale timeout with two derivers: fenced takeovers, nothing lost",
    () =>
      losesNoWork(
        "outage 6 s > stale timeout 3 s",
        staleAfterThreeSeconds,
        // 300 ms into the drain (the fault's moment, part of the scenario), 6 s down
        ({ restart }) => Effect.andThen(Effect.sleep("300 millis"), restart(6_000))
      ).pipe(Effect.tap((figures) => Effect.sync(() => assertPendingAfterFault(figures)))),
    timeout
  )

  it.live(
    "a deriver cut off longer than the stale timeout: its units are taken over, and when it returns it is fenced",
    () =>
      Effect.gen(function*() {
        const figures = yield* losesNoWork(
          "deriver-a partitioned 5 s > stale timeout 3 s",
          staleAfterThreeSeconds,
          ({ cutA }) =>
            Effect.gen(function*() {
              // 300 ms into the drain, a partition of 5 s: the fault's moment and length are the scenario
              yield* Effect.sleep("300 millis")
              yield* cutA(true)
              yield* Effect.sleep("5 seconds")
              yield* cutA(false)
            })
        )
        // deriver-b went on and freed deriver-a's units after the stale timeout: a real takeover, deterministic.
        assert.isAbove(figures.takenOver, 0, "deriver-a's units were taken over")
      }),
    timeout
  )
})
