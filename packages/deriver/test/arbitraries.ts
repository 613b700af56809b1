/** fast-check arbitraries shared by the scheduling property tests. */
import fc from "fast-check"
import type * as Scheduling from "../src/Scheduling.ts"

/** A jitter ratio in [0, 1]. */
export const ratio = fc.double({ min: 0, max: 1, noNaN: true })

/** A uniform draw in [0, 1). */
export const draw = fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true })

/** A current interval between the default base and cap, in milliseconds. */
export const interval = fc.integer({ min: 1000, max: 30_000 })

/** A poll outcome that sleeps. */
export const sleepingOutcome = fc.constantFrom<Scheduling.Outcome>("empty", "error", "busy")

/** Whether `sleepMillis` lies in [1 - r, 1 + r] × `nominal`. */
export const withinJitter = (sleepMillis: number, ratio: number, nominal: number): boolean =>
  sleepMillis >= (1 - ratio) * nominal - 1e-9 && sleepMillis <= (1 + ratio) * nominal + 1e-9
