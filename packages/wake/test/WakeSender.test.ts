import { describe, expect, it } from "@effect/vitest"
import { WakeSender } from "@resilience/wake"
import { Duration, Effect, Exit, Metric } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as WakeMetrics from "../src/internal/WakeMetrics.ts"

/** A real HTTP server whose answers the test holds back and releases; records each request's body. */
const server = (answer: (req: IncomingMessage, res: ServerResponse, body: string) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; bodies: Array<string>; close: () => void }>((resolve) => {
        const bodies: Array<string> = []
        const http = createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => body += chunk)
          req.on("end", () => {
            bodies.push(body)
            answer(req, res, body)
          })
        })
        http.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/wake`,
            bodies,
            close: () => {
              http.closeAllConnections()
              http.close()
            }
          }))
      })
    ),
    (s) => Effect.sync(() => s.close())
  )

const sender = (url: string, timeout = Duration.millis(200)) =>
  Effect.flatMap(WakeSender.settings({ url, schema: "tenant_a", timeout }), WakeSender.make)

/** Waits until `bodies` holds `n` requests, polling every 10 ms for up to 5 s (the assertion after it says if not). */
const arrived = (bodies: ReadonlyArray<string>, n: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500 && bodies.length < n; i++) yield* Effect.sleep(Duration.millis(10))
  })

describe("WakeSender", () => {
  it.live("sends one request in flight and one more for every wake that came meanwhile", () =>
    Effect.gen(function*() {
      const held: Array<ServerResponse> = []
      const s = yield* server((_req, res) => held.push(res))
      const wakes = yield* sender(s.url, Duration.seconds(5))
      // wakes before the request starts are covered by it
      for (let i = 0; i < 10; i++) yield* wakes.wake
      // (a request's arrival is waited for, up to 5 s: a loaded machine may take longer than any fixed sleep)
      yield* arrived(s.bodies, 1)
      expect(s.bodies).toEqual([JSON.stringify({ schema: "tenant_a" })])
      // wakes while it is in flight: one more after it
      for (let i = 0; i < 100; i++) yield* wakes.wake
      yield* Effect.sleep(Duration.millis(100))
      expect(s.bodies).toHaveLength(1)
      held.shift()?.writeHead(202).end("{}")
      yield* arrived(s.bodies, 2)
      expect(s.bodies).toHaveLength(2)
      held.shift()?.writeHead(202).end("{}")
      yield* Effect.sleep(Duration.millis(100))
      expect(s.bodies).toHaveLength(2)
    }).pipe(Effect.scoped))

  it.live("never waits for a target that holds the socket: the request is abandoned at the timeout", () =>
    Effect.gen(function*() {
      const s = yield* server(() => undefined)
      const wakes = yield* sender(s.url, Duration.millis(100))
      const started = Date.now()
      yield* wakes.wake
      yield* Effect.sleep(Duration.millis(20))
      for (let i = 0; i < 10; i++) yield* wakes.wake
      expect(Date.now() - started).toBeLessThan(50)
      yield* Effect.sleep(Duration.millis(350))
      // the first timed out at 100 ms, the one waiting behind it at 200 ms; nothing more was queued
      expect(s.bodies).toHaveLength(2)
    }).pipe(Effect.scoped))

  it.live("a refused connection fails quietly: the wake succeeds, the failure is counted", () =>
    Effect.gen(function*() {
      const failed = Metric.value(Metric.withAttributes(WakeMetrics.failed, { reason: "error" }))
      const before = (yield* failed).count
      const wakes = yield* sender("http://127.0.0.1:1/wake")
      const exit = yield* Effect.exit(wakes.wake)
      expect(Exit.isSuccess(exit)).toBe(true)
      for (let i = 0; i < 50 && (yield* failed).count === before; i++) yield* Effect.sleep(Duration.millis(20))
      expect((yield* failed).count).toBe(before + 1)
    }).pipe(Effect.scoped))

  it.effect("rejects a URL that is not http(s) and a timeout out of range, naming the option", () =>
    Effect.gen(function*() {
      const url = yield* Effect.flip(WakeSender.settings({ url: "ftp://x/wake", schema: "t" }))
      expect(url.parameter).toBe("url")
      const timeout = yield* Effect.flip(
        WakeSender.settings({ url: "http://x/wake", schema: "t", timeout: "1 minute" })
      )
      expect(timeout.parameter).toBe("timeout")
      const schema = yield* Effect.flip(WakeSender.settings({ url: "http://x/wake", schema: "Bad" }))
      expect(schema.parameter).toBe("schema")
    }))
})
