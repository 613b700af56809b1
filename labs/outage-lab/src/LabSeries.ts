/**
 * From 10 Hz samples to per-second series: the simulator's `Series` (same names, same meanings: peaks and
 * means within each second, counts of what happened in it) so that the simulator's `Summary` applies to the
 * lab unchanged, plus what only the real pooler shows (clients waiting, servers, transactions, its CPU).
 */
import type { Simulation } from "@resilience/fleet-sim"
import type * as Sampler from "./Sampler.ts"

/** What the lab measures beyond the simulator's series, per second. */
export interface Extra {
  /** Peak `cl_waiting`: clients waiting for a server connection. */
  readonly clientsWaiting: Float64Array
  /** Peak `sv_active`: server connections running a transaction. */
  readonly serversActive: Float64Array
  /** Peak clients of every pool, the number `max_client_conn` limits. */
  readonly clientsTotal: Float64Array
  /** Transactions PgBouncer relayed in the second. */
  readonly transactions: Float64Array
  /** PgBouncer's CPU use in the second, as a fraction of one core. */
  readonly poolerCpu: Float64Array
  /** API requests served and failed in the second. */
  readonly apiServed: Float64Array
  readonly apiFailed: Float64Array
  /** Samples taken in the second (10 at the nominal rate). */
  readonly samples: Float64Array
}

/** Per-second series of a run of `seconds` seconds. */
export const build = (
  samples: ReadonlyArray<Sampler.Sample>,
  seconds: number
): { readonly series: Simulation.Series; readonly extra: Extra } => {
  const make = () => new Float64Array(seconds)
  const series: Simulation.Series = {
    activeBackends: make(),
    meanActiveBackends: make(),
    clientConnections: make(),
    meanClientConnections: make(),
    claimStarts: make(),
    claimsCompleted: make(),
    connectionAttempts: make(),
    rejections: make(),
    timeouts: make(),
    failedPolls: make()
  }
  const extra: Extra = {
    clientsWaiting: make(),
    serversActive: make(),
    clientsTotal: make(),
    transactions: make(),
    poolerCpu: make(),
    apiServed: make(),
    apiFailed: make(),
    samples: make()
  }
  // per second: the last sample at or before its end, for the counters' differences
  const last: Array<Sampler.Sample | undefined> = Array.from({ length: seconds }, () => undefined)
  for (const sample of samples) {
    const s = Math.floor(sample.atMillis / 1000)
    if (s < 0 || s >= seconds) continue
    const clients = sample.pool.clientsActive + sample.pool.clientsWaiting
    series.activeBackends[s] = Math.max(series.activeBackends[s]!, sample.activeBackends)
    series.meanActiveBackends[s]! += sample.activeBackends
    series.clientConnections[s] = Math.max(series.clientConnections[s]!, clients)
    series.meanClientConnections[s]! += clients
    extra.clientsWaiting[s] = Math.max(extra.clientsWaiting[s]!, sample.pool.clientsWaiting)
    extra.serversActive[s] = Math.max(extra.serversActive[s]!, sample.pool.serversActive)
    extra.clientsTotal[s] = Math.max(extra.clientsTotal[s]!, sample.pool.clientsTotal)
    extra.samples[s]! += 1
    last[s] = sample
  }
  let previous = samples[0]
  for (let s = 0; s < seconds; s++) {
    const n = extra.samples[s]!
    if (n > 0) {
      series.meanActiveBackends[s]! /= n
      series.meanClientConnections[s]! /= n
    }
    const current = last[s]
    if (current === undefined || previous === undefined) continue
    const d = (f: (x: Sampler.Sample) => number) => f(current) - f(previous!)
    series.claimStarts[s] = d((x) => x.counters.pollsOk)
    series.claimsCompleted[s] = d((x) => x.counters.pollsOk)
    series.connectionAttempts[s] = d((x) => x.counters.attempts)
    series.rejections[s] = d((x) => x.counters.refusals)
    series.timeouts[s] = d((x) => x.counters.timeouts)
    series.failedPolls[s] = d((x) => x.counters.pollsFailed)
    extra.transactions[s] = d((x) => x.pool.transactions)
    extra.apiServed[s] = d((x) => x.counters.apiServed)
    extra.apiFailed[s] = d((x) => x.counters.apiFailed)
    const dt = (current.atMillis - previous.atMillis) / 1000
    extra.poolerCpu[s] = dt > 0 ? d((x) => x.poolerCpuSeconds) / dt : 0
    previous = current
  }
  return { series, extra }
}
