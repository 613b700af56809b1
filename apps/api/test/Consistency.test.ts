/**
 * Issue #21's workload through the real API, end to end: 16 clients post single-message requests concurrently to
 * one session and peer while a deriver runs; every acknowledged message is stored once and counted once in the
 * representation, in each of two runs (the second against a deriver that already folded the first), and the
 * checker finds nothing.
 *
 * The race itself (an append committing after a later one was folded in) is forced deterministically on two
 * real connections by packages/domain/test/CommitOrder.test.ts; this check keeps the concurrency (16 clients at
 * once on one peer) and the whole path (client retries, API, queue, deriver, checker) but not the volume
 * (issue #22: it was 5 runs × 16 × 40 posts, 3 minutes).
 */
import { assert, describe, it } from "@effect/vitest"
import { ClientWrites, History } from "@resilience/checker"
import { TestDatabase } from "@resilience/test-db"
import { Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { deriver, retryingClient, session, verdict } from "./Checked.ts"
import { createWorkspace, start } from "./TestServer.ts"

const clients = 16
const perClient = 5
const runs = 2
const words = ["apples", "rivers", "mountains", "violins", "lanterns", "copper", "meadows", "harbors"]

describe("apps/api: concurrent appends to one session and peer", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect(
      `${clients} clients × ${perClient} posts, ${runs} runs: acknowledged = stored = counted`,
      () =>
        Effect.gen(function*() {
          const db = yield* TestDatabase
          const schema = "same_peer"
          // A connection per client kept in the API's pool (issue #22: a fresh one per request, 160 of them at ~30 ms
          // of the server's CPU each): the race is between commits, whichever connection they come on.
          const api = yield* start({ url: db.url, schema, pool: { poolClass: "queue", poolSize: clients } })
          const figures: Array<string> = []
          yield* Effect.gen(function*() {
            yield* deriver(schema)
            for (let run = 1; run <= runs; run++) {
              const workspace = `run-${run}`
              const token = yield* createWorkspace(api, workspace)
              // A 503 (a connect timeout on this loaded machine) is resent with the same Idempotency-Key.
              const client = yield* retryingClient(api)
              const history = History.make()
              const startedAt = performance.now()
              yield* Effect.forEach(
                Array.from({ length: clients }, (_, c) => c),
                (c) =>
                  Effect.forEach(Array.from({ length: perClient }, (_, i) => i), (i) =>
                    ClientWrites.append(client, history, token, {
                      client: `c${c}`,
                      workspace,
                      session: "s1",
                      peer: "alice",
                      content: `run ${run} client ${c} message ${i} ${words[(c + i) % words.length]}`
                    })),
                { concurrency: "unbounded", discard: true }
              )
              const postedMillis = performance.now() - startedAt
              const result = yield* verdict(schema, history, `run ${run}: ${clients} clients × ${perClient} posts`)
              const t = result.totals
              figures.push(
                `run ${run}: acknowledged ${t.acknowledged}, unknown ${t.unknown}, stored ${t.stored}, counted ${t.counted}, ` +
                  `posted in ${Math.round(postedMillis)} ms, settled in ${Math.round(performance.now() - startedAt)} ms`
              )
              assert.isTrue(result.valid, `run ${run}`)
              assert.deepStrictEqual([t.acknowledged, t.stored, t.counted], [
                clients * perClient,
                clients * perClient,
                clients * perClient
              ])
            }
          }).pipe(Effect.scoped, Effect.provide([Layer.orDie(session(db.url)), FetchHttpClient.layer]))
          console.log(`[figures] ${figures.join("\n[figures] ")}`)
        }),
      120_000
    )
  })
})
