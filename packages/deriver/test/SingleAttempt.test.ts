/**
 * Spec §8, "Single attempt": under a failing pooler exactly one connection attempt is made per poll, no
 * repeated attempts (the regression guard against re-introducing a retry). A deriver with `DB_POOL_CLASS=null`
 * reaches the shared test server through a counting proxy that drops every connection (a pooler that
 * cannot serve); its polls are counted by the loop's observer, its attempts by the proxy.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { CountingProxy, TestDatabase } from "@resilience/test-db"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Deriver from "../src/Deriver.ts"
import * as Handlers from "../src/Handlers.ts"
import { Database, freshSchema, testConfig } from "./support.ts"

layer(Database, { excludeTestServices: true })("Single attempt per poll (counting proxy)", (it) => {
  for (const overloadEnabled of [false, true]) {
    it.effect(`a failing pooler gets exactly one connection attempt per poll (DERIVER_OVERLOAD_ENABLED=${overloadEnabled})`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema
        const { url } = yield* TestDatabase
        const server = new URL(url)
        const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
        yield* proxy.setCut(true)
        const session = DbSession.layer({
          url: proxy.url(url),
          connectTimeout: "1 second",
          poolClass: "null",
          poolSize: 1,
          driver: "pg"
        })
        const config = yield* testConfig({ overloadEnabled, pollingSleepMaxIntervalSeconds: 0.1 })
        let polls = 0
        let failed = 0
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(session, scope)
        yield* Scope.provide(
          Deriver.start({
            schema,
            handlers: Handlers.empty,
            config,
            observer: (event) =>
              Effect.sync(() => {
                if (event._tag !== "Polled") return
                polls += 1
                if (event.outcome === "error") failed += 1
              })
          }).pipe(Effect.provide(context)),
          scope
        )
        yield* Effect.sleep("1500 millis")
        // Stopped before counting: no poll is half-way between its attempt and its decision.
        yield* Scope.close(scope, Exit.void)
        const attempts = yield* proxy.attempts
        assert.strictEqual(failed, polls, "every poll failed")
        assert.isAtLeast(polls, 5, `polls: ${polls}`)
        if (overloadEnabled) {
          // The process's gate holds polls back during the outage (no attempt at all): at most one each, and the
          // shutdown's release of held units may be one more (the circuit's probe).
          assert.isAtMost(attempts, polls + 1, `attempts ${attempts} for ${polls} polls`)
          assert.isAbove(attempts, 0)
        } else {
          // The shutdown's release of held units is one more checkout (one attempt).
          assert.strictEqual(attempts, polls + 1, `attempts ${attempts} for ${polls} polls`)
        }
      }))
  }
})
