/**
 * Issue #21's workload through the real API: 16 clients each post 40 single-message requests to one session and
 * peer while a deriver runs; every acknowledged message is stored once and counted once in the representation,
 * five runs in a row, and the checker finds nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { History } from "@resilience/checker"
import { TestDatabase } from "@resilience/test-db"
import { Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { deriver, retryingClient, send, session, verdict } from "./Checked.ts"
import { createWorkspace, start } from "./TestServer.ts"

const clients = 16
const perClient = 40
const runs = 5
const words = ["apples", "rivers", "mountains", "violins", "lanterns", "copper", "meadows", "harbors"]

describe("apps/api: concurrent appends to one session and peer", () => {
  it.layer(TestDatabase.layer, { timeout: 300_000, excludeTestServices: true })((it) => {
    it.effect(
      `${clients} clients × ${perClient} posts, ${runs} runs: acknowledged = stored = counted`,
      () =>
        Effect.gen(function*() {
          const db = yield* TestDatabase
          const schema = "same_peer"
          const api = yield* start({ url: db.url, schema })
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
                    send(client, history, token, {
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
      600_000
    )
  })
})
