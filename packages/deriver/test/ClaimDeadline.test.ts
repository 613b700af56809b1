/**
 * The claim's own deadline against real PostgreSQL: a claim stuck behind a lock (as behind a thrashing or
 * locked database) is cut short by `DERIVER_CLAIM_TIMEOUT_SECONDS`, cancelled on the server, and counted as
 * an overload signal that raises the poll interval's floor; once the lock is gone the polls are fast again
 * and the work is done.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { TableLock, TestDatabase } from "@resilience/test-db"
import { Effect, Exit, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as Handlers from "../src/Handlers.ts"
import type * as PollLoop from "../src/PollLoop.ts"
import { count, Database, eventually, freshSchema, testConfig } from "./support.ts"

type Polled = Extract<PollLoop.Event, { _tag: "Polled" }>

/** One worker polling every 0.05–0.1 s, each claim cut short after 0.3 s. */
const claimDeadline = {
  workers: 1,
  pollingSleepIntervalSeconds: 0.05,
  pollingSleepMaxIntervalSeconds: 0.1,
  claimTimeoutSeconds: 0.3
}

layer(Database, { excludeTestServices: true })("Claim deadline (PostgreSQL)", (it) => {
  it.effect("a claim stuck behind a lock is cut short, cancelled on the server, and raises the overload floor", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const db = yield* DbSession
      const schema = yield* freshSchema
      yield* db.withConnection((c) => Enqueue.enqueue(c, schema, [{ workUnitKey: "u", taskType: "noop", payload: {} }]))
      const waitingOnLock = count(
        // this suite's database only: other files' claims on the shared server run at the same time
        `SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%candidates%'`
      )
      const polled: Array<Polled> = []
      const config = yield* testConfig({ ...claimDeadline, overloadMaxIntervalSeconds: 0.4 })
      const scope = yield* Scope.make()
      yield* Effect.scoped(Effect.gen(function*() {
        yield* TableLock.hold(database.url, SchemaName.qualify(schema, "queue"))
        yield* Scope.provide(
          Deriver.start({
            schema,
            handlers: Handlers.make({ noop: () => Effect.void }),
            config,
            observer: (event) => Effect.sync(() => event._tag === "Polled" && polled.push(event))
          }),
          scope
        )
        yield* eventually(Effect.sync(() => polled.filter((e) => e.signal === "cancelled").length >= 3), 30_000)
        // Cancelled on the server, not left waiting on the lock.
        yield* eventually(Effect.map(waitingOnLock, (n) => n === 0), 5_000)
      }))
      // The lock is gone: the next poll is fast, claims the unit, and the item is processed.
      yield* eventually(
        count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`).pipe(
          Effect.map((n) => n === 0)
        ),
        30_000
      )
      yield* Scope.close(scope, Exit.void)
      const cancelled = polled.filter((e) => e.signal === "cancelled")
      assert.isTrue(cancelled.every((e) => e.outcome === "error"))
      // Each cancelled claim raised the floor, past the idle cap (0.1 s) and no further than the overload cap.
      assert.isAbove(cancelled.at(-1)!.floorMillis, 100)
      assert.isTrue(polled.every((e) => e.floorMillis <= 400))
      assert.isTrue(polled.some((e) => e.signal === "fast" && e.outcome === "claimed"), "fast again after the lock")
    }))

  it.effect("with DERIVER_OVERLOAD_ENABLED=false the claim is still cut short, but raises no floor", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const schema = yield* freshSchema
      const polled: Array<Polled> = []
      const config = yield* testConfig({ ...claimDeadline, overloadEnabled: false })
      yield* Effect.scoped(Effect.gen(function*() {
        yield* TableLock.hold(database.url, SchemaName.qualify(schema, "queue"))
        yield* Deriver.start({
          schema,
          handlers: Handlers.empty,
          config,
          observer: (event) => Effect.sync(() => event._tag === "Polled" && polled.push(event))
        })
        yield* eventually(Effect.sync(() => polled.filter((e) => e.outcome === "error").length >= 3), 30_000)
      }))
      // Cut short by the deadline (failed polls), yet no overload signal and no floor: the spec's schedule alone.
      assert.isTrue(polled.filter((e) => e.outcome === "error").length >= 3)
      assert.isTrue(polled.every((e) => e.signal === "none" || e.signal === "fast"))
      assert.isTrue(polled.every((e) => e.floorMillis === 0))
    }))
})
