/**
 * A `pg_stat_activity` sampler: the counterpart of the monitoring samplers that caught the incident. One
 * dedicated connection reads, per application, the client connections and the active queries (and the
 * active deriver claims among them) at a fixed rate.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Schedule } from "effect"
import type { Scope } from "effect"
import pg from "pg"

/**
 * One sample: per `application_name`, connections, active queries and active claim queries.
 *
 * @since 0.1.0
 */
export interface Sample {
  readonly atMillis: number
  readonly byApplication: ReadonlyMap<string, { connections: number; active: number; claims: number }>
}

/**
 * The sampler's query. A claim is recognized by the deriver's claim SQL (`work_unit_key` selected from a
 * queue with `NOT processed`); the sampler's own backend is excluded.
 *
 * @since 0.1.0
 */
export const sql = `SELECT coalesce(nullif(application_name, ''), '(none)') AS application,
       count(*)::int AS connections,
       count(*) FILTER (WHERE state = 'active')::int AS active,
       count(*) FILTER (WHERE state = 'active' AND query ILIKE '%work_unit_key%' AND query ILIKE '%processed%')::int AS claims
  FROM pg_stat_activity
 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
 GROUP BY 1`

/**
 * Opens the sampler's connection in the scope (closed with it).
 *
 * @since 0.1.0
 */
export const connect = (url: string): Effect.Effect<pg.Client, Error, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new pg.Client({ connectionString: url, application_name: "fleet-sim-sampler" })
        await client.connect()
        return client
      },
      catch: (cause) => new Error(`sampler: cannot connect: ${String(cause)}`)
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

/**
 * Takes one sample.
 *
 * @since 0.1.0
 */
export const sample = (client: pg.Client): Effect.Effect<Sample, Error> =>
  Effect.gen(function*() {
    const atMillis = yield* Clock.currentTimeMillis
    const result = yield* Effect.tryPromise({
      try: () => client.query<{ application: string; connections: number; active: number; claims: number }>(sql),
      catch: (cause) => new Error(`sampler: ${String(cause)}`)
    })
    const byApplication = new Map(
      result.rows.map((r) => [r.application, { connections: r.connections, active: r.active, claims: r.claims }])
    )
    return { atMillis, byApplication }
  })

/**
 * Samples every `periodMillis` and hands each sample to `onSample`, until interrupted.
 *
 * @since 0.1.0
 */
export const run = (
  client: pg.Client,
  periodMillis: number,
  onSample: (sample: Sample) => Effect.Effect<void>
): Effect.Effect<never, Error> =>
  Effect.flatMap(sample(client), onSample).pipe(Effect.repeat(Schedule.spaced(periodMillis)), Effect.forever)
