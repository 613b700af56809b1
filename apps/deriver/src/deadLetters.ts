/**
 * The operator's dead-letter command: `npm run dead-letters -w @resilience/deriver-app -- list|replay …`
 * (`DeadLetters.usage` of `@resilience/deriver`), on `DATABASE_URL`/`DB_*` and `DB_SCHEMA` as the deriver reads
 * them. Prints one line per dead letter (JSON) or how many it replayed; an invalid command line exits 2 with the
 * usage, a failing database exits 1 naming the failure.
 *
 * @since 0.3.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbConfig, DbSession } from "@resilience/db-session"
import { DeadLetters } from "@resilience/deriver"
import { Variables } from "@resilience/environment"
import { SchemaName } from "@resilience/schema"
import { Console, Effect, Layer, References } from "effect"

const program = Effect.gen(function*() {
  const command = yield* DeadLetters.parse(process.argv.slice(2))
  const database = yield* DbConfig.config(Variables.database)
  const schema = yield* SchemaName.config(Variables.schema)
  const lines = yield* DeadLetters.run(schema, command).pipe(
    Effect.provide(Layer.orDie(DbSession.layer(database)))
  )
  for (const line of lines) yield* Console.log(line)
}).pipe(
  Effect.catchTag(
    "InvalidCommand",
    (error) => Effect.andThen(Console.error(error.message), Effect.sync(() => process.exit(2)))
  ),
  Effect.tapError((error) => Console.error(String(error))),
  Effect.catch(() => Effect.sync(() => process.exit(1)))
)

// stdout is the command's answer: only warnings and errors are logged
NodeRuntime.runMain(program.pipe(Effect.provideService(References.MinimumLogLevel, "Warn")))
