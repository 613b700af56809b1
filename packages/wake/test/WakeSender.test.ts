import { describe, expect, it } from "@effect/vitest"
import { WakeSender } from "@resilience/wake"
import { Duration, Effect, Exit, Metric, Schedule } from "effect"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as WakeMetrics from "../src/internal/WakeMetrics.ts"

interface Target {
  readonly url: string
  readonly bodies: Array<string>
  /** Called on each request's arrival. */
  readonly listeners: Set<() => void>
  readonly close: () => void
}

/** A real HTTP server whose answers the test holds back and releases; records each request's body. */
const server = (answer: (req: IncomingMessage, res: ServerResponse, body: string) => void) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<Target>((resolve) => {
        const bodies: Array<string> = []
        const listeners = new Set<() => void>()
        const http = createServer((req, res) => {
          let body = ""
          req.on("data", (chunk) => body += chunk)
          req.on("end", () => {
            bodies.push(body)
            for (const listener of listeners) listener()
            answer(req, res, body)
          })
        })
        http.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/wake`,
            bodies,
            listeners,
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

/**
 * Waits until the target has received `n` requests: woken by each arrival, not polled. Dies after 30 s (a deadline
 * for a stuck run, not a speed bound).
 */
const arrived = (target: Target, n: number) =>
  Effect.callback<void>((resume) => {
    const check = () => {
      if (target.bodies.length < n) return
      target.listeners.delete(check)
      resume(Effect.void)
    }
    target.listeners.add(check)
    check()
    return Effect.sync(() => target.listeners.delete(check))
  }).pipe(Effect.timeoutOrElse({
    duration: "30 seconds",
    orElse: () => Effect.die(new Error(`${target.bodies.length} of ${n} wake requests arrived in 30 s`))
  }))

/** A wake counter's value (`wakes_failed_total` by reason, `wakes_sent_total`). */
const count = (counter: Metric.Metric<number, Metric.CounterState<number>>) =>
  Effect.map(Metric.value(counter), (state) => state.count)

/**
 * Waits until `counter` reaches `n`: polled every 5 ms (a metric has no event to wait on), dies after 30 s (a
 * deadline for a stuck run, not a speed bound).
 */
const counted = (counter: Metric.Metric<number, Metric.CounterState<number>>, n: number) =>
  count(counter).pipe(
    Effect.repeat({ until: (value) => value >= n, schedule: Schedule.spaced("5 millis") }),
    Effect.timeoutOrElse({
      duration: "30 seconds",
      orElse: () => Effect.die(new Error(`counter did not reach ${n} in 30 s`))
    })
  )

describe("WakeSender", () => {
  it.live("sends one request in flight and one more for every wake that came meanwhile", () =>
    Effect.gen(function*() {
      const held: Array<ServerResponse> = []
      const s = yield* server((_req, res) => held.push(res))
      const wakes = yield* sender(s.url, Duration.seconds(5))
      // wakes before the request starts are covered by it
      for (let i = 0; i < 10; i++) yield* wakes.wake
      // (a request's arrival is waited for, up to 5 s: a loaded machine may take longer than any fixed sleep)
      yield* arrived(s, 1)
      expect(s.bodies).toEqual([JSON.stringify({ schema: "tenant_a" })])
      // wakes while it is in flight: one more after it
      for (let i = 0; i < 100; i++) yield* wakes.wake
      // an absence has no event to wait for: a window in which a second request would have arrived (one arrives
      // in a few ms once sent)
      yield* Effect.sleep(Duration.millis(100))
      expect(s.bodies).toHaveLength(1)
      held.shift()?.writeHead(202).end("{}")
      yield* arrived(s, 2)
      expect(s.bodies).toHaveLength(2)
      held.shift()?.writeHead(202).end("{}")
      // the same absence after the second: no third request
      yield* Effect.sleep(Duration.millis(100))
      expect(s.bodies).toHaveLength(2)
    }).pipe(Effect.scoped))

  it.live("never waits for a target that holds the socket: the request is abandoned at the timeout", () =>
    Effect.gen(function*() {
      const timedOut = Metric.withAttributes(WakeMetrics.failed, { reason: "timeout" })
      const before = yield* count(timedOut)
      const s = yield* server(() => undefined)
      // (500 ms: far longer than the arrival's notice and ten wakes take, even on a loaded machine)
      const wakes = yield* sender(s.url, Duration.millis(500))
      yield* wakes.wake
      yield* arrived(s, 1)
      for (let i = 0; i < 10; i++) yield* wakes.wake
      // the wakes returned before the held request's timeout ended it: none waited for the target
      expect(yield* count(timedOut)).toBe(before)
      // the first timed out, then the one waiting behind it; nothing more was queued
      yield* counted(timedOut, before + 2)
      expect(s.bodies).toHaveLength(2)
      // an absence has no event to wait for: a window in which a third request would have arrived
      yield* Effect.sleep(Duration.millis(100))
      expect(s.bodies).toHaveLength(2)
      expect(yield* count(timedOut)).toBe(before + 2)
    }).pipe(Effect.scoped))

  it.live("a refused connection fails quietly: the wake succeeds, the failure is counted", () =>
    Effect.gen(function*() {
      const failed = Metric.withAttributes(WakeMetrics.failed, { reason: "error" })
      const before = yield* count(failed)
      const wakes = yield* sender("http://127.0.0.1:1/wake")
      const exit = yield* Effect.exit(wakes.wake)
      expect(Exit.isSuccess(exit)).toBe(true)
      yield* counted(failed, before + 1)
      expect(yield* count(failed)).toBe(before + 1)
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
