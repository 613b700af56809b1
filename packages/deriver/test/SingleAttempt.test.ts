/**
 * Spec §8, "Single attempt": under a failing pooler exactly one connection attempt is made per poll, no
 * repeated attempts (the regression guard against re-introducing a retry). A deriver with `DB_POOL_CLASS=null`
 * reaches the shared test server through a counting proxy that drops every connection (a pooler that
 * cannot serve); its polls are counted by the loop's observer, its attempts by the proxy.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, Eventually, TestDatabase } from "@resilience/test-db"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import type * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import type * as PollLoop from "../src/PollLoop.ts"
import { Database, freshSchema, testConfig } from "./support.ts"

/**
 * A deriver with no handlers in a scope of its own, over a `null` pool through `proxy`'s `url`, reporting its loop's
 * events to `observer`; closing the returned scope shuts it down.
 */
const startThrough = (
  proxyUrl: string,
  schema: SchemaName.SchemaName,
  config: DeriverConfig.DeriverConfig,
  observer: (event: PollLoop.Event) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const session = DbSession.layer({
      url: proxyUrl,
      connectTimeout: "1 second",
      poolClass: "null",
      poolSize: 1,
      driver: "pg"
    })
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(session, scope)
    yield* Scope.provide(
      Deriver.start({ schema, handlers: Handlers.empty, config, observer }).pipe(Effect.provide(context)),
      scope
    )
    return scope
  })

layer(Database, { excludeTestServices: true })("Single attempt per poll (counting proxy)", (it) => {
  for (const overloadEnabled of [false, true]) {
    it.effect(`a failing pooler gets exactly one connection attempt per poll (DERIVER_OVERLOAD_ENABLED=${overloadEnabled})`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema
        const { url } = yield* TestDatabase
        const server = new URL(url)
        const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
        yield* proxy.setCut(true)
        const config = yield* testConfig({ overloadEnabled, pollingSleepMaxIntervalSeconds: 0.1 })
        let polls = 0
        let failed = 0
        // The proxy's count at each poll's decision: the poll's own attempt has ended (refused) and the next poll
        // has not begun, so the count there must be exactly the number of polls so far, and the gap between two
        // decisions exactly one attempt. Counting at the decisions, not after the shutdown, leaves out a poll
        // that the shutdown interrupts between its attempt and its decision.
        const attemptsAtDecision: Array<number> = []
        const scope = yield* startThrough(
          proxy.url(url),
          schema,
          config,
          (event) =>
            event._tag !== "Polled" ? Effect.void : proxy.attempts.pipe(
              Effect.map((attempts) => {
                polls += 1
                if (event.outcome === "error") failed += 1
                attemptsAtDecision.push(attempts)
              })
            )
        )
        // a count of polls, not a span of time (a loaded machine polls less often in 1.5 s)
        yield* Eventually.until(() => `8 polls (${polls} so far)`, Effect.sync(() => polls >= 8))
        // Stopped before counting: no poll is half-way between its attempt and its decision.
        yield* Scope.close(scope, Exit.void)
        const attempts = yield* proxy.attempts
        assert.strictEqual(failed, polls, "every poll failed")
        assert.isAtLeast(polls, 5, `polls: ${polls}`)
        const perPoll = attemptsAtDecision.map((count, i) => count - (i === 0 ? 0 : attemptsAtDecision[i - 1]!))
        if (overloadEnabled) {
          // The process's gate may hold a poll back during the outage (no attempt at all): at most one each.
          assert.isTrue(perPoll.every((n) => n === 0 || n === 1), `attempts per poll: ${perPoll.join(" ")}`)
          assert.isAbove(attempts, 0)
        } else {
          assert.deepStrictEqual(perPoll, perPoll.map(() => 1), `attempts per poll: ${perPoll.join(" ")}`)
        }
        // After the last decision: at most the shutdown's release of held units (one checkout) and a poll the
        // shutdown cut short after its attempt.
        assert.isAtMost(attempts - attemptsAtDecision.at(-1)!, 2, `attempts ${attempts} for ${polls} polls`)
      }))
  }
})

layer(Database, { excludeTestServices: true })("Idle cost: maintenance rides on the polls (counting proxy)", (it) => {
  it.effect("an idle deriver on a null pool makes one connection attempt per poll, its maintenance rounds included", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const { url } = yield* TestDatabase
      const db = yield* DbSession
      const server = new URL(url)
      const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
      // polls at most ~0.15 s apart, a round due every ~2 s: each round is handed to a poll that claims nothing, long
      // before its hand-off (2 s here) would run it on a checkout of its own, even on a loaded machine
      const config = yield* testConfig({
        pollingSleepMaxIntervalSeconds: 0.1,
        staleWorkUnitCleanupIntervalSeconds: 2,
        staleSessionTimeoutMinutes: 5
      })
      const sessions = SchemaName.qualify(schema, "active_queue_sessions")
      /** An ownership row whose owner stopped ten minutes ago: only a maintenance round (the stale cleanup) deletes it. */
      const orphan = (key: string) =>
        db.query(
          `INSERT INTO ${sessions} (work_unit_key, owner, last_updated)
           VALUES ($1, 'crashed-instance', now() - interval '10 minutes')`,
          [key]
        )
      const cleaned = (key: string) =>
        Eventually.until(
          `${key}'s stale row cleaned up`,
          Effect.map(
            db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sessions} WHERE work_unit_key = $1`, [key]),
            (rows) => rows[0]?.n === 0
          )
        )
      // the proxy's count at each poll's decision: the poll's own attempt has ended and the next has not begun
      const attemptsAtDecision: Array<number> = []
      const scope = yield* startThrough(proxy.url(url), schema, config, (event) =>
        event._tag !== "Polled"
          ? Effect.void
          : Effect.map(proxy.attempts, (attempts) => void attemptsAtDecision.push(attempts)))
      // three rounds, each proved by the stale row it deleted (a round after the previous row was gone)
      for (const key of ["first", "second", "third"]) {
        yield* orphan(key)
        yield* cleaned(key)
      }
      yield* Scope.close(scope, Exit.void)
      const attempts = yield* proxy.attempts
      assert.isAtLeast(attemptsAtDecision.length, 3)
      // at the n-th poll's decision, exactly n attempts so far: none of the rounds made one of its own
      assert.deepStrictEqual(
        attemptsAtDecision,
        attemptsAtDecision.map((_, i) => i + 1),
        `attempts at each poll's decision: ${attemptsAtDecision.join(" ")}`
      )
      // after the last decision: a poll the shutdown cut short after its attempt and the shutdown's release; 3 was seen
      // once in ~40 runs on a loaded machine, most likely the last round on a checkout of its own (no poll took it
      // within its hand-off; the test closes as soon as a round has cleaned the third row), which is by design
      assert.isAtMost(attempts - attemptsAtDecision.at(-1)!, 3, `attempts ${attempts}`)
    }))
})
