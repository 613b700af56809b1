/**
 * What the lab's own clients saw, counted as it happens: connection attempts and their failures by kind (per
 * client role), the fleet's polls by outcome, and the API requests served or failed. The sampler reads
 * snapshots of these ten times a second; differences between snapshots are the per-second series.
 */

/** Who made a connection attempt. */
export type Role = "deriver" | "api"

/** Plain mutable counts (one process, one thread: no locking needed). */
export interface Counters {
  /** Connection attempts (checkouts tried), per role. */
  readonly attempts: Record<Role, number>
  /** Failures by `role:phase:reason`, e.g. `api:checkout:Saturated`, `deriver:query:Saturated`. */
  readonly failures: Map<string, number>
  /** Refusals at PgBouncer's client limit (`max_client_conn`), all roles. */
  refusals: number
  /** Failed checkouts that ran out of their connect timeout, all roles. */
  timeouts: number
  /**
   * Deriver uses interrupted after the connection was handed over: claims cut short by the claim timeout
   * (their statement cancelled), plus those in flight when the fleet stops.
   */
  cancelled: number
  /** Deriver polls by outcome (`claimed`, `empty`, `busy`, `error`). */
  readonly polls: Map<string, number>
  apiArrived: number
  apiServed: number
  apiFailed: number
}

/** Fresh counters. */
export const make = (): Counters => ({
  attempts: { deriver: 0, api: 0 },
  failures: new Map(),
  refusals: 0,
  timeouts: 0,
  cancelled: 0,
  polls: new Map(),
  apiArrived: 0,
  apiServed: 0,
  apiFailed: 0
})

/** Adds one to a keyed count. */
export const bump = (map: Map<string, number>, key: string): void => {
  map.set(key, (map.get(key) ?? 0) + 1)
}

/** The sum of a keyed count. */
export const total = (map: ReadonlyMap<string, number>, keep: (key: string) => boolean = () => true): number => {
  let sum = 0
  for (const [key, value] of map) if (keep(key)) sum += value
  return sum
}

/** A frozen copy of the scalar counts, for one sample. */
export interface Snapshot {
  readonly attempts: number
  readonly refusals: number
  readonly timeouts: number
  readonly failures: number
  readonly pollsOk: number
  readonly pollsFailed: number
  readonly apiArrived: number
  readonly apiServed: number
  readonly apiFailed: number
}

/** Takes a snapshot. */
export const snapshot = (c: Counters): Snapshot => ({
  attempts: c.attempts.deriver + c.attempts.api,
  refusals: c.refusals,
  timeouts: c.timeouts,
  failures: total(c.failures),
  pollsOk: total(c.polls, (key) => key === "claimed" || key === "empty"),
  pollsFailed: total(c.polls, (key) => key === "error"),
  apiArrived: c.apiArrived,
  apiServed: c.apiServed,
  apiFailed: c.apiFailed
})
