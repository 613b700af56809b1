/**
 * Units claimed beyond the workers (`DERIVER_PREFETCH`) against real PostgreSQL: each waits for one of the `workers`
 * handler slots, none is lost, and a shutdown releases those still waiting.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Eventually } from "@resilience/test-db"
import { Deferred, Effect, Exit, Fiber, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import type * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as Handlers from "../src/Handlers.ts"
import { count, Database, freshSchema, testConfig } from "./support.ts"

const units = 12

/**
 * A deriver with `workers` workers and `prefetch` units claimed beyond them over 12 single-item units, whose handler
 * holds until `open` completes; counts the handlers running at once.
 */
const blocked = (
  scope: Scope.Scope,
  workers: number,
  prefetch: number | undefined,
  more: DeriverConfig.Input = {},
  observer?: Deriver.Options<never>["observer"]
) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema
    const db = yield* DbSession
    yield* db.withConnection((c) =>
      Enqueue.enqueue(
        c,
        schema,
        Array.from({ length: units }, (_, i) => ({ workUnitKey: `unit-${i}`, taskType: "held", payload: { i } }))
      )
    )
    const open = yield* Deferred.make<void>()
    const running = { now: 0, most: 0, runs: 0 }
    const handler: Handlers.Handler = () =>
      Effect.gen(function*() {
        running.now += 1
        running.runs += 1
        running.most = Math.max(running.most, running.now)
        yield* Deferred.await(open)
        running.now -= 1
      })
    const config = yield* testConfig({ workers, ...more, ...(prefetch === undefined ? {} : { prefetch }) })
    const deriver = yield* Scope.provide(
      Deriver.start({ schema, handlers: Handlers.make({ held: handler }), config, observer }),
      scope
    )
    const owned = count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "active_queue_sessions")}`)
    const unprocessed = count(`SELECT count(*) FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`)
    return { deriver, open, running, owned, unprocessed }
  })

const withScope = <A, E, R>(body: (scope: Scope.Closeable) => Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(Scope.make(), body, (scope, exit) => Scope.close(scope, exit))

layer(Database, { excludeTestServices: true })("prefetch (PostgreSQL)", (it) => {
  it.effect("2 workers and 3 units claimed beyond them: 5 units owned, 2 handlers at a time, every item once", () =>
    withScope((scope) =>
      Effect.gen(function*() {
        const { deriver, open, owned, running, unprocessed } = yield* blocked(scope, 2, 3)
        yield* Eventually.satisfying("5 units held", deriver.held, (held) => held.length === 5)
        yield* Eventually.satisfying("5 ownership rows", owned, (n) => n === 5)
        assert.strictEqual(running.now, 2, "the units beyond the workers wait for a handler slot")
        yield* Deferred.succeed(open, undefined)
        yield* Eventually.satisfying("every item processed", unprocessed, (n) => n === 0)
        assert.strictEqual(running.most, 2, "never more handlers at once than workers")
        assert.strictEqual(running.runs, units, "each item handled once")
        yield* Eventually.satisfying("every unit released", owned, (n) => n === 0)
      })
    ))

  it.effect("the default claims 8 units beyond the workers per worker; 0 claims for free workers only", () =>
    Effect.gen(function*() {
      for (const [prefetch, expected] of [[undefined, 9], [0, 1]] as const) {
        yield* withScope((scope) =>
          Effect.gen(function*() {
            const { deriver, open, owned, running } = yield* blocked(scope, 1, prefetch)
            yield* Eventually.satisfying(`${expected} units held`, deriver.held, (held) => held.length === expected)
            yield* Eventually.satisfying(`${expected} ownership rows`, owned, (n) => n === expected)
            assert.strictEqual(running.now, 1, `prefetch ${String(prefetch)}: the worker's handler runs`)
            // the loop keeps polling while the workers are busy: it holds no more than that afterwards either
            yield* Effect.sleep("100 millis")
            assert.strictEqual((yield* deriver.held).length, expected, `prefetch ${String(prefetch)}: no more held`)
            yield* Deferred.succeed(open, undefined)
          })
        )
      }
    }))

  it.effect("a shutdown past its grace releases the units still waiting for a slot; their items stay for later", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { deriver, owned, running, unprocessed } = yield* blocked(scope, 1, 2, { shutdownGraceSeconds: 0.2 })
      yield* Eventually.satisfying("3 units held", deriver.held, (held) => held.length === 3)
      // the running handler never finishes: the grace ends, the worker is interrupted, every unit is released
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(running.runs, 1, "one handler slot: the two units beyond it never ran")
      assert.strictEqual(yield* owned, 0, "no ownership row left behind")
      assert.strictEqual(yield* unprocessed, units, "no item lost or recorded")
    }))

  it.effect("a shutdown gives up the units claimed ahead that have not started: the running one finishes, the others are released unrun", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const stopping = yield* Deferred.make<void>()
      const { deriver, open, owned, running, unprocessed } = yield* blocked(
        scope,
        1,
        2,
        {},
        (event) => event._tag === "Stopping" ? Deferred.succeed(stopping, undefined) : Effect.void
      )
      yield* Eventually.satisfying("3 units held", deriver.held, (held) => held.length === 3)
      // the shutdown begins while one handler runs and two units wait for its slot; then the handler finishes
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* Deferred.await(stopping)
      yield* Deferred.succeed(open, undefined)
      yield* Fiber.join(closing)
      assert.strictEqual(running.runs, 1, "the two units that waited for the slot were not started")
      assert.strictEqual(yield* owned, 0, "no ownership row left behind")
      assert.strictEqual(yield* unprocessed, units - 1, "the running unit's item recorded; the rest stay for later")
    }))
})
