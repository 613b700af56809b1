/**
 * Consumer test 1: a tenant's own deriver, from the published packages only. Migrates the queue into a schema
 * of its own, enqueues 20 items in 5 work units, runs a deriver with its own handler until every item is
 * processed, then stops it (its scope) and checks that it released its claims. DATABASE_URL: a real PostgreSQL.
 */
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig, Handlers, QueueSchema } from "@resilience/deriver"
import { Migrator, SchemaName } from "@resilience/schema"
import { Effect, Exit, Scope } from "effect"

const schema = SchemaName.makeUnsafe("consumer_deriver")
const seen: Array<string> = []

const program = Effect.gen(function*() {
  const db = yield* DbSession
  yield* Migrator.run(schema, [QueueSchema.component])
  const items = Array.from({ length: 20 }, (_, i) => ({
    workUnitKey: `unit-${i % 5}`,
    taskType: "greet",
    payload: { name: `n${i}` }
  }))
  yield* db.query(
    `INSERT INTO ${SchemaName.qualify(schema, "queue")} (work_unit_key, task_type, payload)
     SELECT e ->> 'workUnitKey', e ->> 'taskType', e -> 'payload' FROM jsonb_array_elements($1::jsonb) AS e`,
    [JSON.stringify(items)]
  )
  const handlers = Handlers.make({
    greet: (item) => Effect.sync(() => seen.push(String((item.payload as { name: string }).name)))
  })
  const config = yield* DeriverConfig.make({ workers: 2, pollingStartupJitterSeconds: 0 })
  const scope = yield* Scope.make()
  yield* Scope.provide(Deriver.start({ schema, handlers, config }), scope)
  const pending = db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`
  ).pipe(Effect.map((rows) => rows[0]!.n))
  for (let i = 0; i < 300 && (yield* pending) > 0; i++) yield* Effect.sleep("100 millis")
  yield* Scope.close(scope, Exit.void)
  const left = yield* pending
  const held = yield* db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "active_queue_sessions")}`
  ).pipe(Effect.map((rows) => rows[0]!.n))
  if (left !== 0 || seen.length !== 20 || held !== 0) {
    return yield* Effect.die(new Error(`deriver: ${left} left, ${seen.length} handled, ${held} claims held`))
  }
  yield* Effect.log(`deriver: 20 items in 5 units handled by the consumer's handler, no claim left`)
})

await Effect.runPromise(
  program.pipe(
    Effect.scoped,
    Effect.provide(DbSession.layer({
      url: process.env["DATABASE_URL"]!,
      connectTimeout: "2 seconds",
      poolClass: "null",
      poolSize: 1,
      driver: "pg",
      applicationName: "consumer-deriver"
    }))
  )
)
