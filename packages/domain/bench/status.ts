/**
 * Benchmark (not a test): the queue status call and the claim, with 100 pending items, before and after
 * 1,000,000 processed rows of the same workspace join the history. Both should stay flat: the status reads
 * the backlog's partial index and the trigger-kept counters, the claim reads the partial index of unprocessed
 * rows. Starts a throw-away embedded PostgreSQL (or uses DATABASE_URL). `npm run bench -w @resilience/domain`.
 */
import { DbSession } from "@resilience/db-session"
import { Queue } from "@resilience/deriver"
import { SchemaName } from "@resilience/schema"
import { Effect, Logger } from "effect"
import { Setup, Stats } from "../../../packages/bench-kit/src/index.ts"
import * as Domain from "../src/Domain.ts"
import * as QueueStatus from "../src/QueueStatus.ts"

const schema = SchemaName.makeUnsafe("bench_status")
const workspace = "acme"
const rounds = 20

/** Median wall time of `rounds` runs of `effect`, in milliseconds. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const samples: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      const started = performance.now()
      yield* effect
      samples.push(performance.now() - started)
    }
    return Stats.median(samples)
  })

const program = Effect.gen(function*() {
  const db = yield* DbSession
  yield* Domain.migrate(schema)
  const queue = SchemaName.qualify(schema, "queue")
  yield* db.query(
    `INSERT INTO ${queue} (work_unit_key, task_type, payload)
     SELECT 'unit-' || g, 'representation', jsonb_build_object('workspace', $1::text) FROM generate_series(1, 100) g`,
    [workspace]
  )
  // The claim in a transaction that rolls back (it inserts ownership rows), so every round claims the same.
  const claim = db.transaction((c) =>
    Effect.andThen(Queue.claimWithItems(c, schema, 10, "bench", 20), Effect.fail("rollback" as const))
  ).pipe(Effect.ignore)
  const status = QueueStatus.forWorkspace(schema, workspace)
  // The query the status endpoint ran before migration 5: every row of the workspace, history included.
  const scan = db.query(
    `SELECT count(*) FILTER (WHERE NOT q.processed AND a.work_unit_key IS NULL)::int,
            count(*) FILTER (WHERE NOT q.processed AND a.work_unit_key IS NOT NULL)::int,
            count(*) FILTER (WHERE q.processed AND q.error IS NULL)::int,
            count(*) FILTER (WHERE q.processed AND q.error IS NOT NULL)::int
     FROM ${queue} q LEFT JOIN ${SchemaName.qualify(schema, "active_queue_sessions")} a USING (work_unit_key)
     WHERE q.payload ->> 'workspace' = $1`,
    [workspace]
  )
  yield* db.query(`ANALYZE ${queue}`)
  const before = { status: yield* timed(status), claim: yield* timed(claim), scan: yield* timed(scan) }
  const started = performance.now()
  yield* db.query(
    `INSERT INTO ${queue} (work_unit_key, task_type, payload, processed, error, created_at)
     SELECT 'done-' || (g % 5000), 'representation', jsonb_build_object('workspace', $1::text), true,
            CASE WHEN g % 100 = 0 THEN 'boom' END, now() - interval '1 day'
     FROM generate_series(1, 1000000) g`,
    [workspace]
  )
  const insertSeconds = (performance.now() - started) / 1000
  yield* db.query(`ANALYZE ${queue}`)
  const after = { status: yield* timed(status), claim: yield* timed(claim), scan: yield* timed(scan) }
  const counts = yield* status
  const line = (label: string, a: number, b: number) => `| ${label} | ${a.toFixed(2)} ms | ${b.toFixed(2)} ms |`
  console.log(
    `queue status and claim, median of ${rounds} (100 pending; history inserted in ${insertSeconds.toFixed(1)} s)`
  )
  console.log("| call | 0 processed rows | 1,000,000 processed rows |")
  console.log("| --- | --- | --- |")
  console.log(line("GET …/queue (QueueStatus.forWorkspace)", before.status, after.status))
  console.log(line("claim with first batches (10 units, rolled back)", before.claim, after.claim))
  console.log(line("for comparison: the former status query (scans the history)", before.scan, after.scan))
  console.log(`status after: ${JSON.stringify(counts)}`)
})

const main = Effect.gen(function*() {
  const url = yield* Setup.databaseUrl({ maxConnections: 20 })
  yield* program.pipe(
    Effect.provide(DbSession.layer({
      url,
      connectTimeout: "5 seconds",
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "bench-status"
    }))
  )
}).pipe(Effect.scoped)

Effect.runPromise(main.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
