/**
 * The API's wake of its deriver, through the real server against real PostgreSQL and a real HTTP target: a 201
 * that enqueued work sends `POST /wake {"schema": …}`; a replay (same `Idempotency-Key`) sends none; a target
 * that refuses, holds the socket or answers 500 changes nothing about the 201 (no 5xx, not slower by the
 * target's delay).
 */
import { assert, describe, it } from "@effect/vitest"
import { Eventually, TestDatabase } from "@resilience/test-db"
import { WakeSender } from "@resilience/wake"
import { Duration, Effect } from "effect"
import { createServer, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { createWorkspace, postMessages, start } from "./TestServer.ts"

/** A wake target on loopback: `answer` decides what it does with each request; the bodies it got. */
const target = (answer: (res: ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; bodies: Array<string>; close: () => void }>((resolve) => {
        const bodies: Array<string> = []
        const server = createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => body += chunk)
          req.on("end", () => {
            bodies.push(body)
            answer(res)
          })
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/wake`,
            bodies,
            close: () => {
              server.closeAllConnections()
              server.close()
            }
          }))
      })
    ),
    (t) => Effect.sync(() => t.close())
  )

/** Waits until the target has received `n` requests (polled: a deadline for a stuck run, not a time to wait out). */
const received = (t: { readonly bodies: ReadonlyArray<string> }, n: number) =>
  Eventually.until(() => `${n} wakes (${t.bodies.length} so far)`, Effect.sync(() => t.bodies.length >= n), {
    every: "5 millis"
  })

const settings = (url: string, schema: string, timeout = Duration.millis(300)) =>
  Effect.orDie(WakeSender.settings({ url, schema, timeout }))

describe("apps/api wakes its deriver", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000, excludeTestServices: true })((it) => {
    it.effect("a 201 that enqueued work sends one wake naming the schema; a replay sends none", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const deriver = yield* target((res) => res.writeHead(202).end("{\"decision\":\"pollNow\"}"))
        const schema = "wake_sent"
        const api = yield* start({ url: db.url, schema, wake: yield* settings(deriver.url, schema) })
        const token = yield* createWorkspace(api, "acme")
        assert.deepStrictEqual(deriver.bodies, [], "creating a workspace enqueues nothing")
        const first = yield* postMessages(api, token, ["hello"], "k1")
        assert.strictEqual(first.status, 201, first.text)
        yield* received(deriver, 1)
        assert.deepStrictEqual(deriver.bodies, [JSON.stringify({ schema })])
        const replay = yield* postMessages(api, token, ["hello"], "k1")
        assert.strictEqual(replay.status, 201, replay.text)
        // an absence has no event to wait for: a window in which a wake would have arrived (one arrives in a few ms)
        yield* Effect.sleep("200 millis")
        assert.strictEqual(deriver.bodies.length, 1, "a replay enqueued nothing: no wake")
        yield* postMessages(api, token, ["again"])
        yield* received(deriver, 2)
        assert.strictEqual(deriver.bodies.length, 2)
      }).pipe(Effect.scoped))

    it.effect("a target that holds the socket, answers 500 or refuses: every write is a 201, none waits for it", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const holding = yield* target(() => undefined)
        const failing = yield* target((res) => res.writeHead(500).end())
        const targets = [holding.url, failing.url, "http://127.0.0.1:1/wake"]
        for (const [index, url] of targets.entries()) {
          const schema = `wake_fault_${index}`
          const api = yield* start({ url: db.url, schema, wake: yield* settings(url, schema, Duration.seconds(3)) })
          const token = yield* createWorkspace(api, "acme")
          for (let i = 0; i < 5; i++) {
            const reply = yield* postMessages(api, token, [`m${i}`])
            assert.strictEqual(reply.status, 201, `${url}: ${reply.text}`)
            // the holding target keeps each request 3 s (the timeout): a 201 that waited for it would show it
            assert.isBelow(reply.millis, 2000, `${url}: ${reply.millis} ms`)
          }
        }
        assert.isAtLeast(holding.bodies.length, 1)
        assert.isAtLeast(failing.bodies.length, 1)
      }).pipe(Effect.scoped))
  })
})
