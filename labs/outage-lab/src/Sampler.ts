/**
 * The 10 Hz sampler: PgBouncer's pool (clients active and waiting, servers, transactions) from its admin
 * console, PostgreSQL's active backends from `pg_stat_activity` (the fleet-sim `ActivitySampler`, on a direct
 * connection), PgBouncer's CPU time, and a snapshot of the lab's own counters. A sample that takes longer
 * than a tick delays the next; the achieved rate is reported.
 */
import { ActivitySampler } from "@resilience/fleet-sim"
import { Clock, Duration, Effect } from "effect"
import type pg from "pg"
import * as Counters from "./Counters.ts"
import * as Pooler from "./Pooler.ts"

/** One sample. */
export interface Sample {
  /** Milliseconds since the run's start. */
  readonly atMillis: number
  readonly pool: Pooler.PoolView
  /** Backends running a statement (the sampler's own excluded), and all client backends. */
  readonly activeBackends: number
  readonly backends: number
  /** The pooler's CPU seconds so far (PgBouncer, and stunnel in front of it). */
  readonly poolerCpuSeconds: number
  readonly counters: Counters.Snapshot
}

/** Samples every `periodMillis` into `into` until interrupted. */
export const run = (options: {
  readonly admin: pg.Client
  readonly direct: pg.Client
  readonly poolerPids: ReadonlyArray<number>
  readonly counters: Counters.Counters
  readonly startedAtMillis: number
  readonly periodMillis: number
  readonly into: Array<Sample>
}) =>
  Effect.gen(function*() {
    let next = options.startedAtMillis
    for (;;) {
      const pool = yield* Pooler.poolView(options.admin)
      const activity = yield* ActivitySampler.sample(options.direct)
      let activeBackends = 0
      let backends = 0
      for (const row of activity.byApplication.values()) {
        activeBackends += row.active
        backends += row.connections
      }
      const now = yield* Clock.currentTimeMillis
      options.into.push({
        atMillis: now - options.startedAtMillis,
        pool,
        activeBackends,
        backends,
        poolerCpuSeconds: Pooler.cpuSecondsOf(options.poolerPids),
        counters: Counters.snapshot(options.counters)
      })
      next = Math.max(next + options.periodMillis, now)
      yield* Effect.sleep(Duration.millis(next - now))
    }
  })
