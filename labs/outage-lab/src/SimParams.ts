/**
 * The simulator's parameters for a lab run: the same fleet, limits, rates, schedule, policy and trigger, the
 * pooler's costs from the calibration. The lab's database work is sleeps and claims on empty queues, which
 * never oversubscribe its cores, so the model gets as many cores as backends (pure delay, no processor
 * sharing). A restart in the lab happens at `trigger-at` on a running fleet; the simulator's restart is its
 * t = 0, so that run is shifted: it starts at the lab's restart and ends at the lab's horizon.
 */
import { Model } from "@resilience/fleet-sim"
import { PollBackoff } from "@resilience/jitter"
import type { InvalidParameter } from "@resilience/parameters"
import { Effect } from "effect"
import type * as Calibration from "./Calibration.ts"
import { type Settings, triggerEndSeconds } from "./Settings.ts"

/** The pooler's costs the model needs (measured, or the simulator's defaults). */
export type Costs = Pick<
  Calibration.Calibration,
  "connectCostMillis" | "rejectCostMillis" | "relayCostMillis" | "claimMillis"
>

/** Where the simulated run starts on the lab's time axis (0, or the restart). */
export const offsetSeconds = (settings: Settings): number =>
  settings.trigger === "restart" ? settings.triggerAtSeconds : 0

/**
 * The model of a lab run. `forSummary`: the lab's own time axis (the restart marked as an instant trigger at
 * `trigger-at`), used to summarise the lab's series with the simulator's definitions; otherwise the run the
 * simulator executes.
 */
export const of = (
  settings: Settings,
  costs: Costs,
  forSummary = false
): Effect.Effect<Model.Params, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const poll = yield* PollBackoff.settings({
      base: settings.baseIntervalSeconds * 1000,
      max: settings.maxIntervalSeconds * 1000,
      multiplier: 2,
      ratio: 0,
      enabled: true
    })
    const policy = Model.policy(settings.policy, poll, undefined, settings.connectTimeoutSeconds * 1000)
    const shifted = settings.trigger === "restart" && !forSummary
    const params: Model.Params = {
      derivers: settings.derivers,
      horizonSeconds: settings.horizonSeconds - (shifted ? offsetSeconds(settings) : 0),
      seed: "1",
      start: "aligned",
      ...policy,
      initialInterval: "base",
      pooler: {
        maxClientConnections: settings.maxClientConn,
        backendCeiling: settings.poolSize,
        threads: 1,
        connectCostMillis: costs.connectCostMillis,
        rejectCostMillis: costs.rejectCostMillis,
        relayCostMillis: costs.relayCostMillis,
        queueTimeoutMillis: settings.queryWaitTimeoutSeconds * 1000
      },
      database: { cores: settings.poolSize, claimMillis: costs.claimMillis, contention: 0 },
      work: { probability: 0, handlerMillis: 0 },
      api: { requestsPerSecond: settings.apiRps, queryMillis: settings.apiQueryMillis },
      spike: settings.trigger === "stall"
        ? { atSeconds: settings.triggerAtSeconds, seconds: settings.stallSeconds, backends: settings.poolSize }
        : forSummary
        ? { atSeconds: triggerEndSeconds(settings), seconds: 0, backends: 0 }
        : undefined
    }
    return params
  })
