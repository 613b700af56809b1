import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import * as Settings from "../src/Settings.ts"

// The library reads the names its caller gives; here the API's (`@resilience/environment`): API_ADMISSION_ + each
// setting's name in upper snake case.
const names = Object.fromEntries(
  (Object.keys(Settings.defaults) as ReadonlyArray<keyof Settings.Settings>)
    .filter((setting) => setting !== "decreaseRatio")
    .map((setting) => [setting, `API_ADMISSION_${setting.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`])
) as unknown as Settings.Names

const fromEnv = (env: Record<string, string>) => Settings.config(names).parse(ConfigProvider.fromEnv({ env }))

describe("Settings", () => {
  it.effect("defaults are valid", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* Settings.make(), Settings.defaults)
      assert.deepStrictEqual(yield* fromEnv({}), Settings.defaults)
    }))

  it.effect("each option outside its range is an error naming it and what is allowed", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<[Settings.Options, string]> = [
        [{ maxConcurrency: 0 }, "maxConcurrency = 0 is not allowed: expected an integer in [1, 100000]"],
        [{ maxConcurrency: 2.5 }, "maxConcurrency = 2.5 is not allowed"],
        [{ queueTimeoutMillis: -1 }, "queueTimeoutMillis = -1 is not allowed: expected an integer in [0, 60000]"],
        [{ openMillis: 0 }, "openMillis = 0 is not allowed"],
        [{ openJitterRatio: 1.5 }, "openJitterRatio = 1.5 is not allowed: expected a number in [0, 1]"],
        [{ decreaseRatio: 1 }, "decreaseRatio = 1 is not allowed: expected a number in (0, 1), exclusive"],
        [{ tripFailures: 0 }, "tripFailures = 0 is not allowed"],
        [
          { minConcurrency: 8, maxConcurrency: 4 },
          "minConcurrency = 8 is not allowed: expected an integer in [1, maxConcurrency = 4]"
        ],
        [
          { openMillis: 2_000, openMaxMillis: 1_000 },
          "openMaxMillis = 1000 is not allowed: expected an integer in [openMillis = 2000, 600000]"
        ],
        [{ openMaxMillis: 600_001 }, "openMaxMillis = 600001 is not allowed"]
      ]
      for (const [options, message] of cases) {
        const error = yield* Effect.flip(Settings.make(options))
        assert.include(error.message, message)
      }
    }))

  it.effect("the environment: values are read, and a bad one is an error naming the variable", () =>
    Effect.gen(function*() {
      const read = yield* fromEnv({
        API_ADMISSION_ENABLED: "false",
        API_ADMISSION_MAX_CONCURRENCY: "32",
        API_ADMISSION_QUEUE_TIMEOUT_MILLIS: "0",
        API_ADMISSION_OPEN_MILLIS: "250"
      })
      assert.deepStrictEqual(read, {
        ...Settings.defaults,
        enabled: false,
        maxConcurrency: 32,
        queueTimeoutMillis: 0,
        openMillis: 250
      })
      for (
        const [name, value] of [
          ["API_ADMISSION_MAX_CONCURRENCY", "0"],
          ["API_ADMISSION_QUEUE_TIMEOUT_MILLIS", "soon"],
          ["API_ADMISSION_OPEN_JITTER_RATIO", "2"],
          ["API_ADMISSION_ENABLED", "perhaps"]
        ] as const
      ) {
        const error = yield* Effect.flip(fromEnv({ [name]: value }))
        assert.include(String(error), name)
      }
      const inverted = yield* Effect.flip(
        fromEnv({ API_ADMISSION_MIN_CONCURRENCY: "9", API_ADMISSION_MAX_CONCURRENCY: "8" })
      )
      assert.include(String(inverted), "API_ADMISSION_MIN_CONCURRENCY = 9 is not allowed")
      assert.include(String(inverted), "API_ADMISSION_MAX_CONCURRENCY = 8")
      const cap = yield* Effect.flip(
        fromEnv({ API_ADMISSION_OPEN_MILLIS: "5000", API_ADMISSION_OPEN_MAX_MILLIS: "4000" })
      )
      assert.include(String(cap), "API_ADMISSION_OPEN_MAX_MILLIS = 4000 is not allowed")
      assert.include(String(cap), "API_ADMISSION_OPEN_MILLIS = 5000")
    }))

  it.effect("the open window's cap: 30 s by default, read from the environment, never below the window", () =>
    Effect.gen(function*() {
      assert.strictEqual(Settings.defaults.openMaxMillis, 30_000)
      assert.strictEqual((yield* fromEnv({ API_ADMISSION_OPEN_MAX_MILLIS: "60000" })).openMaxMillis, 60_000)
      assert.strictEqual((yield* fromEnv({ API_ADMISSION_OPEN_MILLIS: "45000" })).openMaxMillis, 45_000)
      assert.strictEqual((yield* Settings.make({ openMillis: 45_000 })).openMaxMillis, 45_000)
    }))
})
