import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit } from "effect"
import * as DeriverConfig from "../src/DeriverConfig.ts"

// The library reads the names its caller gives; here the deriver app's (`@resilience/environment`): DERIVER_ +
// each field's name in upper snake case.
const names: DeriverConfig.Names = new Proxy({} as DeriverConfig.Names, {
  get: (_target, field) => `DERIVER_${String(field).replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`
})

const read = (env: Record<string, string>) =>
  DeriverConfig.config(names).parse(ConfigProvider.fromEnv({ env })).pipe(Effect.exit)

describe("DeriverConfig", () => {
  it.effect("defaults follow the configuration table; the startup window defaults to the max interval", () =>
    Effect.gen(function*() {
      const exit = yield* read({})
      assert.isTrue(Exit.isSuccess(exit))
      const config = (exit as Exit.Success<DeriverConfig.DeriverConfig>).value
      assert.deepStrictEqual(config, {
        workers: 1,
        backoff: { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 },
        workerBackoff: { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 },
        gateBackoff: { baseMillis: 1000, multiplier: 2, maxMillis: 30_000, enabled: true, ratio: 0.5 },
        recordFlushMillis: 1000,
        initialInterval: "base",
        startupJitterMillis: 30_000,
        staleTimeoutMillis: 300_000,
        cleanupIntervalMillis: 60_000,
        shutdownGraceMillis: 10_000,
        batchSize: 20,
        prefetch: 8,
        claimAlong: true,
        overload: { slowPollMillis: 2000, maxMillis: 300_000, multiplier: 2, recoveryMillis: 30_000 },
        overloadEnabled: true,
        historyRetentionMillis: 168 * 3_600_000,
        claimTimeoutMillis: 10_000,
        wakeMinIntervalMillis: 50
      })
      const custom = yield* read({
        DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "10",
        DERIVER_POLLING_BACKOFF_ENABLED: "false",
        DERIVER_POLLING_INITIAL_INTERVAL: "max",
        DERIVER_OVERLOAD_ENABLED: "false"
      })
      assert.isTrue(Exit.isSuccess(custom))
      const value = (custom as Exit.Success<DeriverConfig.DeriverConfig>).value
      assert.strictEqual(value.startupJitterMillis, 10_000)
      assert.strictEqual(value.initialInterval, "max")
      assert.isFalse(value.backoff.enabled)
      assert.isTrue(value.workerBackoff.enabled, "workers back off whatever the poll does")
      assert.isTrue(value.gateBackoff.enabled)
      const eight = yield* read({ DERIVER_WORKERS: "8" })
      assert.isTrue(Exit.isSuccess(eight))
      assert.isTrue(
        (eight as Exit.Success<DeriverConfig.DeriverConfig>).value.claimAlong,
        "claims along with any number of workers (records of many units claim for all of them at once)"
      )
      assert.strictEqual(
        (eight as Exit.Success<DeriverConfig.DeriverConfig>).value.prefetch,
        64,
        "8 units claimed beyond the workers per worker"
      )
      const none = yield* read({ DERIVER_WORKERS: "8", DERIVER_PREFETCH: "0" })
      assert.strictEqual((none as Exit.Success<DeriverConfig.DeriverConfig>).value.prefetch, 0)
      assert.isFalse(value.overloadEnabled)
      // The floor's recovery time defaults to the idle cap.
      assert.strictEqual(value.overload.recoveryMillis, 10_000)
    }))

  /**
   * Per variable, its bad values: each with words the error must say (none beyond the name for a value that does
   * not parse), and the other variables set alongside.
   */
  const invalid: Record<string, ReadonlyArray<readonly [string, string, Record<string, string>?]>> = {
    DERIVER_POLLING_JITTER_RATIO: [["1.5", "[0, 1]"], ["-0.1", "[0, 1]"]],
    DERIVER_POLLING_SLEEP_INTERVAL_SECONDS: [["0", "> 0"]],
    DERIVER_POLLING_BACKOFF_MULTIPLIER: [["0.5", ">= 1"]],
    DERIVER_POLLING_STARTUP_JITTER_SECONDS: [["-1", ">= 0"]],
    DERIVER_STALE_SESSION_TIMEOUT_MINUTES: [["0", "> 0"]],
    DERIVER_WORKERS: [["0", ">= 1"], ["2.5", "integer"], ["many", ""]],
    DERIVER_STALE_WORK_UNIT_CLEANUP_INTERVAL_SECONDS: [["-5", "> 0"]],
    DERIVER_OVERLOAD_SLOW_POLL_SECONDS: [["0", "> 0"]],
    DERIVER_OVERLOAD_RECOVERY_SECONDS: [["0", "> 0"]],
    DERIVER_HISTORY_RETENTION_HOURS: [["0", "> 0"]],
    DERIVER_CLAIM_TIMEOUT_SECONDS: [["0", "> 0"]],
    DERIVER_POLLING_BACKOFF_ENABLED: [["maybe", ""]],
    DERIVER_OVERLOAD_ENABLED: [["maybe", ""]],
    DERIVER_POLLING_INITIAL_INTERVAL: [["middle", "base or max"]],
    DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: [["2", ">= DERIVER_POLLING_SLEEP_INTERVAL_SECONDS", {
      DERIVER_POLLING_SLEEP_INTERVAL_SECONDS: "5"
    }]],
    DERIVER_OVERLOAD_MAX_INTERVAL_SECONDS: [["20", ">= DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS (30)"]]
  }
  for (const [variable, bad] of Object.entries(invalid)) {
    for (const [value, allowed, others] of bad) {
      const env = { ...others, [variable]: value }
      it.effect(`rejects ${JSON.stringify(env)} naming ${variable}`, () =>
        Effect.gen(function*() {
          const exit = yield* read(env)
          assert.isTrue(Exit.isFailure(exit))
          const message = String(exit)
          assert.include(message, variable)
          assert.include(message, allowed)
        }))
    }
  }
})
