/** The deriver against real PostgreSQL: exclusivity, order, stale takeover, handler failures, shutdown. */
import { assert, layer } from "@effect/vitest"
import { DatabaseUnavailable, DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Eventually, TestDatabase } from "@resilience/test-db"
import { Deferred, Effect, Exit, Predicate, Scope } from "effect"
import pg from "pg"
import * as Deriver from "../src/Deriver.ts"
import type * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as Handlers from "../src/Handlers.ts"
import type * as PollLoop from "../src/PollLoop.ts"
import { count, Database, freshSchema, testConfig } from "./support.ts"

const unprocessed = (schema: SchemaName.SchemaName) =>
  count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`)
const owned = (schema: SchemaName.SchemaName) =>
  count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "active_queue_sessions")}`)

const enqueue = (schema: SchemaName.SchemaName, items: ReadonlyArray<Enqueue.NewItem>) =>
  Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.withConnection((c) => Enqueue.enqueue(c, schema, items))
  })

/** A fresh schema whose queue holds `items`. */
const queueOf = (items: ReadonlyArray<Enqueue.NewItem>) => Effect.tap(freshSchema, (schema) => enqueue(schema, items))

/** Waits (real clock, with a deadline) until `n` items of the schema's queue are left unprocessed. */
const unprocessedIs = (schema: SchemaName.SchemaName, n = 0) =>
  Eventually.satisfying(`${n} unprocessed items`, unprocessed(schema), (left) => left === n)

/** Runs `body` with derivers started in their own scope, closed (gracefully) at the end. */
const withScope = <A, E, R>(body: (scope: Scope.Closeable) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(Scope.make(), body, (scope, exit) => Scope.close(scope, exit))

/** Starts one deriver on `options` in a scope of its own, waits until its queue is drained, and closes the scope. */
const drained = <R>(options: Deriver.Options<R>) =>
  withScope((scope) => Effect.andThen(Scope.provide(Deriver.start(options), scope), unprocessedIs(options.schema)))

/** Starts a deriver in `scope` whose `noop` items' handler does nothing; returns it and the polls it decides. */
const startLogged = (scope: Scope.Scope, schema: SchemaName.SchemaName, config: DeriverConfig.DeriverConfig) => {
  const polls: Array<Extract<PollLoop.Event, { _tag: "Polled" }>> = []
  const observer = (event: PollLoop.Event) =>
    Effect.sync(() => {
      if (event._tag === "Polled") polls.push(event)
    })
  return Effect.map(
    Scope.provide(
      Deriver.start({ schema, handlers: Handlers.make({ noop: () => Effect.void }), config, observer }),
      scope
    ),
    (deriver) => ({ deriver, polls })
  )
}

layer(Database, { excludeTestServices: true })("Deriver (PostgreSQL)", (it) => {
  it.effect("two derivers never work on the same unit at once, and each unit is drained in id order", () =>
    Effect.gen(function*() {
      const units = Array.from({ length: 12 }, (_, i) => `unit-${i}`)
      // Interleave the units so that ids of one unit are spread out.
      const items = Array.from(
        { length: 15 },
        (_, round) => units.map((unit) => ({ workUnitKey: unit, taskType: "record", payload: { round } }))
      ).flat()
      const schema = yield* queueOf(items)
      const active = new Map<string, string>()
      const violations: Array<string> = []
      const seen = new Map<string, Array<bigint>>()
      const handler: Handlers.Handler = (item) =>
        Effect.gen(function*() {
          const other = active.get(item.workUnitKey)
          if (other !== undefined) violations.push(`${item.workUnitKey}: ${other} and ${item.id}`)
          active.set(item.workUnitKey, item.id)
          seen.set(item.workUnitKey, [...(seen.get(item.workUnitKey) ?? []), BigInt(item.id)])
          // the scenario: a handler at work for a while, so that a second deriver on the same unit would overlap it
          yield* Effect.sleep("2 millis")
          active.delete(item.workUnitKey)
        })
      const handlers = Handlers.make({ record: handler })
      const config = yield* testConfig({ workers: 3 })
      yield* withScope((scope) =>
        Effect.gen(function*() {
          yield* Scope.provide(Deriver.start({ schema, handlers, config, owner: "a" }), scope)
          yield* Scope.provide(Deriver.start({ schema, handlers, config, owner: "b" }), scope)
          yield* unprocessedIs(schema)
        })
      )
      assert.deepStrictEqual(violations, [])
      for (const unit of units) {
        const ids = seen.get(unit) ?? []
        assert.strictEqual(ids.length, 15, unit)
        assert.deepStrictEqual(ids, [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), `${unit} in id order`)
      }
      assert.strictEqual(yield* owned(schema), 0, "every unit was released")
    }))

  it.effect("a worker takes its next unit in the record of its last; not while a record or poll is slow", () =>
    Effect.gen(function*() {
      /**
       * Drains `n` single-item units with one worker; returns how many of them the poller's own claims took. With
       * `slow`, every checkout starts 2 ms late: the deriver's clock counts whole milliseconds, and a statement that
       * took less than one would measure 0 ms, not slow by any threshold; and the process's own time is not taken
       * off a statement's (`subtractLag` false): on a loaded machine it can cover those 2 ms, and the statement then
       * measures fast (a unit claimed along, in one CI run).
       */
      const drain = (n: number, input: DeriverConfig.Input, slow = false) =>
        Effect.gen(function*() {
          const schema = yield* queueOf(
            Array.from({ length: n }, (_, i) => ({ workUnitKey: `u${i}`, taskType: "t", payload: {} }))
          )
          let polled = 0
          // no unit claimed beyond the worker: each next unit comes from the worker's record or from a poll
          const tested = yield* testConfig({ workers: 1, prefetch: 0, ...input })
          const config = slow ? { ...tested, overload: { ...tested.overload, subtractLag: false } } : tested
          const db = yield* DbSession
          const late = Effect.sleep("2 millis") // the scenario: every checkout late, as on a slow database
          const session = slow
            ? DbSession.of({
              withConnection: (f) => Effect.andThen(late, db.withConnection(f)),
              transaction: (f) => Effect.andThen(late, db.transaction(f)),
              query: <Row = Record<string, unknown>>(sql: string, params?: ReadonlyArray<unknown>) =>
                Effect.andThen(late, db.query<Row>(sql, params)),
              oneCheckout: (effect) => Effect.andThen(late, db.oneCheckout(effect))
            })
            : db
          yield* drained({
            schema,
            handlers: Handlers.make({ t: () => Effect.void }),
            config,
            observer: (event) =>
              Effect.sync(() => {
                if (event._tag === "Polled") polled += event.claimed.length
              })
          }).pipe(Effect.provideService(DbSession, session))
          assert.strictEqual(yield* owned(schema), 0, "every unit was released")
          return polled
        })
      assert.isAtMost(yield* drain(30, {}), 2, "the polls claimed the first unit (and one after a rare empty record)")
      // every statement counts as slow (a thrash signal): the poller claims each unit under its overload floor
      assert.strictEqual(
        yield* drain(8, { overloadSlowPollSeconds: 0.000001, overloadMaxIntervalSeconds: 0.2 }, true),
        8
      )
    }))

  it.effect("a handler's DbSession is the deriver's gated one: its checkouts go through the checkout gate, and work", () =>
    Effect.gen(function*() {
      const outer = yield* DbSession
      const schema = yield* queueOf(
        Array.from({ length: 4 }, (_, i) => ({ workUnitKey: `u${i}`, taskType: "read", payload: {} }))
      )
      const seen: Array<{ readonly gated: boolean; readonly one: number }> = []
      const handlers = Handlers.make({
        read: () =>
          Effect.gen(function*() {
            const db = yield* DbSession
            const rows = yield* db.query<{ one: number }>("SELECT 1 AS one")
            seen.push({ gated: db !== outer, one: rows[0]!.one })
          })
      })
      yield* drained({ schema, handlers, config: yield* testConfig({ workers: 2 }) })
      assert.deepStrictEqual(seen, Array.from({ length: 4 }, () => ({ gated: true, one: 1 })))
    }))

  it.effect("a stale ownership row is cleaned up and the unit is taken over; a live one is respected", () =>
    Effect.gen(function*() {
      const db = yield* DbSession
      const schema = yield* queueOf([{ workUnitKey: "alive", taskType: "noop", payload: {} }])
      const sessions = SchemaName.qualify(schema, "active_queue_sessions")
      yield* db.query(
        `INSERT INTO ${sessions} (work_unit_key, owner, last_updated) VALUES ('alive', 'other-instance', now())`
      )
      /** Three items of a unit whose owner crashed ten minutes ago (its ownership row first: no one claims them). */
      const orphan = (key: string) =>
        Effect.andThen(
          db.query(
            `INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
             VALUES ($1, 'crashed-instance', now() - interval '10 minutes')`,
            [key]
          ),
          enqueue(schema, Array.from({ length: 3 }, () => ({ workUnitKey: key, taskType: "noop", payload: {} })))
        )
      const takenOver = (key: string) =>
        Eventually.satisfying(
          `${key}'s items processed`,
          count(
            `SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE work_unit_key = $1 AND NOT processed`,
            [
              key
            ]
          ),
          (n) => n === 0
        )
      yield* orphan("orphaned")
      const config = yield* testConfig({ staleSessionTimeoutMinutes: 5, staleWorkUnitCleanupIntervalSeconds: 0.2 })
      yield* withScope((scope) =>
        Effect.gen(function*() {
          const { deriver, polls } = yield* startLogged(scope, schema, config)
          yield* takenOver("orphaned")
          // A later cleanup round: an orphan made now is taken over only by a round after the one that freed the first
          // (each round also saw the live unit's row).
          yield* orphan("orphaned-later")
          yield* takenOver("orphaned-later")
          // Then a poll that finds nothing to claim, with nothing held: a deriver that took the live unit (in that
          // poll or earlier) held it until it was processed, so by then its item would show as processed.
          const before = polls.length
          yield* Eventually.until(
            "an empty poll after the orphans, with no unit held",
            Effect.map(deriver.held, (held) =>
              held.length === 0 && polls.slice(before).some((p) => p.outcome === "empty"))
          )
        })
      )
      const alive = yield* count(
        `SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE work_unit_key = 'alive' AND NOT processed`
      )
      assert.strictEqual(alive, 1, "the unit held by a live instance was not touched")
      const rows = yield* db.query<{ work_unit_key: string }>(`SELECT work_unit_key FROM ${sessions}`)
      assert.deepStrictEqual(rows.map((r) => r.work_unit_key), ["alive"])
    }))

  it.effect("a handler that outlives the stale timeout keeps its unit: the heartbeat runs while it works", () =>
    Effect.gen(function*() {
      const schema = yield* queueOf([{ workUnitKey: "long", taskType: "slow", payload: {} }])
      let running = 0
      let overlapped = false
      let runs = 0
      const slow: Handlers.Handler = () =>
        Effect.gen(function*() {
          running += 1
          runs += 1
          if (running > 1) overlapped = true
          // the scenario: a handler at work well past the stale timeout, its unit kept only by the heartbeat
          yield* Effect.sleep("2500 millis")
          running -= 1
        })
      // Stale after 0.9 s without a heartbeat; the other instance cleans up every 0.2 s.
      const config = yield* testConfig({ staleSessionTimeoutMinutes: 0.015, staleWorkUnitCleanupIntervalSeconds: 0.2 })
      const handlers = Handlers.make({ slow })
      yield* withScope((scope) =>
        Effect.gen(function*() {
          yield* Scope.provide(Deriver.start({ schema, handlers, config, owner: "worker" }), scope)
          yield* Eventually.until("the handler started", Effect.sync(() => runs === 1))
          yield* Scope.provide(Deriver.start({ schema, handlers, config, owner: "cleaner" }), scope)
          // a takeover starts a second run (stale after 0.9 s of the first run's 2.5 s): the wait ends then too
          yield* Eventually.satisfying(
            "the item processed, or a second run",
            unprocessed(schema),
            (left) => left === 0 || runs > 1
          )
        })
      )
      assert.isFalse(overlapped, "no second instance took the unit over while its handler ran")
      assert.strictEqual(runs, 1)
    }))

  it.effect("a unit taken over while its handler runs is given up at the next beat: the handler is interrupted", () =>
    Effect.gen(function*() {
      const db = yield* DbSession
      const schema = yield* queueOf([{ workUnitKey: "taken", taskType: "stuck", payload: {} }])
      const sessions = SchemaName.qualify(schema, "active_queue_sessions")
      let started = 0
      let interrupted = 0
      const stuck: Handlers.Handler = () =>
        Effect.sync(() => started++).pipe(
          Effect.andThen(Effect.never),
          Effect.onInterrupt(() => Effect.sync(() => interrupted++))
        )
      // beats at most 0.3 s apart (a third of the 0.9 s stale timeout); no cleanup of this instance's own
      const config = yield* testConfig({ staleSessionTimeoutMinutes: 0.015, staleWorkUnitCleanupIntervalSeconds: 3600 })
      yield* withScope((scope) =>
        Effect.gen(function*() {
          yield* Scope.provide(
            Deriver.start({ schema, handlers: Handlers.make({ stuck }), config, owner: "worker" }),
            scope
          )
          yield* Eventually.until("the handler started", Effect.sync(() => started === 1))
          // what a stale cleanup and another instance's claim leave: the row gone, the unit someone else's. In one
          // transaction: between two statements this deriver's poll could claim the unit it no longer owns
          yield* db.transaction((connection) =>
            Effect.andThen(
              connection.query(`DELETE FROM ${sessions} WHERE work_unit_key = 'taken'`),
              connection.query(`INSERT INTO ${sessions} (work_unit_key, owner) VALUES ('taken', 'thief')`)
            )
          )
          yield* Eventually.until("the handler interrupted", Effect.sync(() => interrupted === 1))
        })
      )
      assert.strictEqual(started, 1, "the unit was not run again")
      assert.strictEqual(yield* unprocessed(schema), 1, "nothing recorded for the lost unit")
      const owners = yield* db.query<{ owner: string }>(`SELECT owner FROM ${sessions}`)
      assert.deepStrictEqual(owners.map((row) => row.owner), ["thief"], "the new owner's row untouched")
    }))

  it.effect("a failing handler marks its item and the rest of the unit is processed", () =>
    Effect.gen(function*() {
      const db = yield* DbSession
      const schema = yield* queueOf(
        ["ok", "fail", "ok", "die", "ok", "unknown-type"].map((kind) => ({
          workUnitKey: "mixed",
          taskType: kind === "unknown-type" ? "nobody-handles-this" : "work",
          payload: { kind }
        }))
      )
      const order: Array<string> = []
      const handlers = Handlers.make({
        work: (item) =>
          Effect.gen(function*() {
            const kind = (item.payload as { kind: string }).kind
            order.push(kind)
            if (kind === "fail") return yield* Effect.fail({ _tag: "BadInput", message: "cannot derive this" })
            if (kind === "die") return yield* Effect.die(new Error("handler bug"))
          })
      })
      yield* drained({ schema, handlers, config: yield* testConfig() })
      assert.deepStrictEqual(order, ["ok", "fail", "ok", "die", "ok"])
      const rows = yield* db.query<{ error: string | null }>(
        `SELECT error FROM ${SchemaName.qualify(schema, "queue")} ORDER BY id`
      )
      assert.strictEqual(rows[0]!.error, null)
      assert.strictEqual(rows[1]!.error, "BadInput: cannot derive this")
      assert.strictEqual(rows[2]!.error, null)
      assert.include(rows[3]!.error!, "handler bug")
      assert.strictEqual(rows[4]!.error, null)
      assert.include(rows[5]!.error!, "no handler registered")
    }))

  it.effect("a database failure in a handler leaves the item unprocessed and the worker backs off", () =>
    Effect.gen(function*() {
      const schema = yield* queueOf([1, 2, 3].map((n) => ({ workUnitKey: "flaky", taskType: "work", payload: { n } })))
      const attempts: Array<{ n: number; at: number }> = []
      const handlers = Handlers.make({
        work: (item) =>
          Effect.gen(function*() {
            const n = (item.payload as { n: number }).n
            attempts.push({ n, at: Date.now() })
            if (n === 2 && attempts.filter((a) => a.n === 2).length <= 3) {
              return yield* new DatabaseUnavailable({
                reason: "Saturated",
                code: "53300",
                message: "sorry, too many clients already",
                elapsedMillis: 1
              })
            }
          })
      })
      const config = yield* testConfig({ pollingSleepIntervalSeconds: 0.1, pollingSleepMaxIntervalSeconds: 1 })
      yield* drained({ schema, handlers, config })
      const second = attempts.filter((a) => a.n === 2)
      assert.strictEqual(second.length, 4, "three failures, then success")
      // Backoff 0.1, 0.2, 0.4 s nominal with ratio 0.5: at least 0.35 s in total, not a hot loop.
      assert.isAtLeast(second.at(-1)!.at - second[0]!.at, 340)
      assert.deepStrictEqual(attempts.map((a) => a.n), [1, 2, 2, 2, 2, 3], "in order, item 1 not repeated")
      const errors = yield* count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE error IS NOT NULL`)
      assert.strictEqual(errors, 0, "no item is marked with a database error")
    }))

  it.effect("a raw driver error in a handler means what its SQLSTATE means in db-session's table", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const { url } = yield* TestDatabase
      // A role that may not connect at all: connecting as it is a real 53300 (too_many_connections) from the
      // server, thrown by pg as a raw DatabaseError.
      const role = `limited_${schema}`
      const db = yield* DbSession
      yield* db.query(`CREATE ROLE ${role} LOGIN PASSWORD 'x' CONNECTION LIMIT 0`)
      yield* Effect.addFinalizer(() => Effect.ignore(db.query(`DROP ROLE IF EXISTS ${role}`)))
      const limited = new URL(url)
      limited.username = role
      limited.password = "x"
      /** Runs `sql` on a raw pg client (not db-session): its failure is the driver's own error. */
      const raw = async (connectionString: string, sql: string) => {
        const client = new pg.Client({ connectionString })
        client.on("error", () => undefined)
        try {
          await client.connect()
          await client.query(sql)
        } finally {
          await client.end().catch(() => undefined)
        }
      }
      yield* enqueue(
        schema,
        ["refused", "timeout", "syntax"].map((kind) => ({ workUnitKey: "raw", taskType: "work", payload: { kind } }))
      )
      const attempts = new Map<string, number>()
      const codes = new Map<string, unknown>()
      const handlers = Handlers.make({
        work: (item) =>
          Effect.gen(function*() {
            const kind = (item.payload as { kind: string }).kind
            const attempt = (attempts.get(kind) ?? 0) + 1
            attempts.set(kind, attempt)
            const record = (error: unknown) => Effect.sync(() => codes.set(kind, (error as { code?: unknown }).code))
            if (kind === "refused" && attempt === 1) {
              // Thrown as a defect (Effect.promise), the way a handler that awaits a driver fails.
              yield* Effect.promise(() => raw(limited.toString(), "SELECT 1")).pipe(Effect.tapDefect(record))
            }
            if (kind === "timeout" && attempt === 1) {
              // A failure wrapping the driver's error as its cause (Effect.tryPromise): 57014, transient. The
              // scenario: a statement slower than its timeout (pg_sleep in SQL), which the server cancels.
              yield* Effect.tryPromise(() => raw(url, "SET statement_timeout = 50; SELECT pg_sleep(1)")).pipe(
                Effect.tapError((error) => record(Predicate.hasProperty(error, "cause") ? error.cause : error))
              )
            }
            if (kind === "syntax") yield* Effect.promise(() => raw(url, "SELEC 1")).pipe(Effect.tapDefect(record))
          })
      })
      const config = yield* testConfig({ pollingSleepIntervalSeconds: 0.05, pollingSleepMaxIntervalSeconds: 0.2 })
      yield* drained({ schema, handlers, config })
      assert.strictEqual(codes.get("refused"), "53300", "the server refused the raw connection")
      assert.strictEqual(codes.get("timeout"), "57014", "the server cancelled the raw statement")
      assert.strictEqual(codes.get("syntax"), "42601")
      const rows = yield* db.query<{ kind: string; error: string | null }>(
        `SELECT payload->>'kind' AS kind, error FROM ${SchemaName.qualify(schema, "queue")} ORDER BY id`
      )
      // Unavailable and transient: left for a later attempt, then done; permanent: marked with its error.
      assert.strictEqual(rows[0]!.error, null)
      assert.strictEqual(rows[1]!.error, null)
      assert.include(rows[2]!.error ?? "", "syntax error")
      assert.strictEqual(attempts.get("refused"), 2, "run again after the refusal")
      assert.strictEqual(attempts.get("timeout"), 2, "run again after the cancelled statement")
    }))

  it.effect("graceful shutdown: in-flight units finish within the grace period, ownership rows are released", () =>
    Effect.gen(function*() {
      const schema = yield* queueOf(
        ["a", "b", "c"].map((unit) => ({ workUnitKey: unit, taskType: "slow", payload: {} }))
      )
      const stopping = yield* Deferred.make<void>()
      let started = 0
      let finished = 0
      const handlers = Handlers.make({
        slow: () =>
          Effect.gen(function*() {
            started++
            // in flight until the shutdown has begun
            yield* Deferred.await(stopping)
            finished++
          })
      })
      const config = yield* testConfig({ workers: 3, shutdownGraceSeconds: 5 })
      const stoppedAfter = yield* withScope((scope) =>
        Effect.gen(function*() {
          const deriver = yield* Scope.provide(
            Deriver.start({
              schema,
              handlers,
              config,
              observer: (event) => event._tag === "Stopping" ? Deferred.done(stopping, Exit.void) : Effect.void
            }),
            scope
          )
          yield* Eventually.until("three handlers in flight", Effect.sync(() => started === 3))
          assert.strictEqual((yield* deriver.held).length, 3)
          const t0 = Date.now()
          yield* deriver.shutdown
          return Date.now() - t0
        })
      )
      assert.strictEqual(finished, 3, "in-flight units finished")
      assert.isBelow(stoppedAfter, 5000)
      assert.strictEqual(yield* unprocessed(schema), 0)
      assert.strictEqual(yield* owned(schema), 0)
    }))

  it.effect("shutdown after the grace period interrupts what is left, loses nothing and releases everything", () =>
    Effect.gen(function*() {
      const schema = yield* queueOf(
        ["a", "b"].flatMap((unit) => [1, 2, 3].map((n) => ({ workUnitKey: unit, taskType: "stuck", payload: { n } })))
      )
      const handlers = Handlers.make({
        stuck: (item) => (item.payload as { n: number }).n === 1 ? Effect.void : Effect.never
      })
      const config = yield* testConfig({ workers: 2, shutdownGraceSeconds: 0.3 })
      const stoppedAfter = yield* withScope((scope) =>
        Effect.gen(function*() {
          const deriver = yield* Scope.provide(Deriver.start({ schema, handlers, config }), scope)
          yield* unprocessedIs(schema, 4)
          const t0 = Date.now()
          yield* deriver.shutdown
          return Date.now() - t0
        })
      )
      assert.isAtLeast(stoppedAfter, 250)
      assert.isBelow(stoppedAfter, 3000)
      assert.strictEqual(yield* unprocessed(schema), 4, "interrupted items stay in the queue")
      assert.strictEqual(
        yield* count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE error IS NOT NULL`),
        0
      )
      assert.strictEqual(yield* owned(schema), 0, "no ownership row remains")
    }))

  it.effect("closing the scope stops claiming at once: no claims after shutdown", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const config = yield* testConfig({ pollingSleepIntervalSeconds: 0.01, pollingSleepMaxIntervalSeconds: 0.01 })
      const polls = yield* withScope((scope) =>
        Effect.gen(function*() {
          const { deriver, polls } = yield* startLogged(scope, schema, config)
          yield* Eventually.until("a few polls", Effect.sync(() => polls.length >= 3))
          yield* deriver.shutdown
          return polls
        })
      )
      const pollsAtShutdown = polls.length
      yield* enqueue(schema, [{ workUnitKey: "late", taskType: "noop", payload: {} }])
      // An absence has no event to wait for: a window of 20 of the stopped deriver's 10 ms poll intervals, in which
      // a poller that outlived the shutdown would have polled and claimed the new item.
      yield* Effect.sleep("200 millis")
      assert.strictEqual(polls.length, pollsAtShutdown, "no poll after the shutdown")
      assert.strictEqual(yield* unprocessed(schema), 1)
      assert.strictEqual(yield* owned(schema), 0)
    }))
})
