/** The API's environment: the idempotency retention window's default and its refusal of invalid values. */
import { assert, describe, it } from "@effect/vitest"
import { Settings } from "@resilience/api-app"
import { ConfigProvider, Effect } from "effect"

const read = (env: Record<string, string>) =>
  Settings.config.parse(ConfigProvider.fromEnv({ env: { API_ADMIN_TOKEN: "0123456789abcdef", ...env } }))

describe("API settings", () => {
  it.effect("API_IDEMPOTENCY_RETENTION_SECONDS defaults to a day and reads a value", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* read({})).idempotencyRetentionSeconds, 86_400)
      assert.strictEqual((yield* read({ API_IDEMPOTENCY_RETENTION_SECONDS: "600" })).idempotencyRetentionSeconds, 600)
    }))

  for (const value of ["0", "2592001", "1.5", "a day"]) {
    it.effect(`refuses API_IDEMPOTENCY_RETENTION_SECONDS=${value} and names the variable`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(read({ API_IDEMPOTENCY_RETENTION_SECONDS: value }))
        assert.include(error.message, "API_IDEMPOTENCY_RETENTION_SECONDS")
      }))
  }
})
