/** The fleet simulator, the real-cluster herd benchmark and the pg_stat_activity monitor. */
export * as ActivitySampler from "./ActivitySampler.ts"
export * as Chart from "./Chart.ts"
export * as Model from "./Model.ts"
export * as Options from "./Options.ts"
export * as Report from "./Report.ts"
export * as RetryBackoff from "./RetryBackoff.ts"
export * as Simulation from "./Simulation.ts"
export * as Summary from "./Summary.ts"
