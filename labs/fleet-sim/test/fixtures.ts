/** Scenarios small enough to follow every event by hand. */
import * as Model from "../src/Model.ts"

/**
 * The restart preset for `policy` with `derivers` derivers over `horizonSeconds`, free pooler operations, one
 * pooler thread and one backend, one database core and no API traffic; `overrides` last.
 */
export const followable = (
  policy: Model.Policy,
  size: { readonly derivers: number; readonly horizonSeconds: number },
  overrides: Partial<Model.Params> = {}
): Model.Params => {
  const preset = Model.preset("restart", policy)
  const pooler = { backendCeiling: 1, threads: 1, connectCostMillis: 0, rejectCostMillis: 0, relayCostMillis: 0 }
  return {
    ...preset,
    ...size,
    pooler: { ...preset.pooler, ...pooler },
    database: { cores: 1, claimMillis: 170, contention: 0 },
    api: { requestsPerSecond: 0, queryMillis: 20 },
    ...overrides
  }
}
