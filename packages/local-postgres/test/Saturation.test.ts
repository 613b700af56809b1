import { assert, describe, it } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Effect } from "effect"

describe("Saturation.hold", () => {
  it.live("holds every slot, and release frees all of them", () =>
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections: 4 })
      const first = yield* Saturation.hold(cluster.url)
      assert.strictEqual(first.held, 4)
      assert.strictEqual(first.refusal.code, "53300")
      yield* first.release
      yield* first.release
      const second = yield* Saturation.hold(cluster.url)
      assert.strictEqual(second.held, 4, "every slot was free again after release")
    }).pipe(Effect.scoped))

  it.live("frees the slots when its scope closes", () =>
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections: 3 })
      assert.strictEqual((yield* Effect.scoped(Saturation.hold(cluster.url))).held, 3)
      assert.strictEqual((yield* Saturation.hold(cluster.url)).held, 3)
    }).pipe(Effect.scoped))

  it.live("fails when the server accepts `limit` connections without refusing", () =>
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections: 5 })
      const error = yield* Effect.flip(Saturation.hold(cluster.url, { limit: 2 }))
      assert.strictEqual(error._tag, "SaturationFailed")
      assert.include(error.message, "accepted 2 connections")
      assert.strictEqual((yield* Saturation.hold(cluster.url)).held, 5, "what it opened was closed")
    }).pipe(Effect.scoped))

  it.live("fails when a connection fails without a refusal (nothing listening)", () =>
    Effect.gen(function*() {
      const port = yield* Cluster.freePort
      const error = yield* Effect.flip(Saturation.hold(`postgres://postgres:x@127.0.0.1:${port}/postgres`))
      assert.strictEqual(error._tag, "SaturationFailed")
      assert.include(error.message, "without a refusal")
    }).pipe(Effect.scoped))
})
