/**
 * `npm run migrate`: migrates `DB_SCHEMA` once (one checkout, under the schema's advisory lock) and exits with a
 * code that says the outcome, for deployments that migrate before a rollout:
 *
 * - 0: the schema is up to date (migrations applied, or none pending);
 * - 75 (`EX_TEMPFAIL`): the database is unavailable (saturated, unreachable, not accepting connections) or the
 *   statement failed for a passing reason (lock timeout, serialization failure); run it again later;
 * - 78 (`EX_CONFIG`): an invalid setting, or the database rejected the configuration (credentials, unknown
 *   database, missing privilege);
 * - 1: a migration failed.
 *
 * (`ProcessExit.codes` of `@resilience/schema`.)
 *
 * Reads the `DB_*` settings of the apps (`DATABASE_URL`, `DB_SCHEMA`, `DB_CONNECT_TIMEOUT_SECONDS`, …).
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbSession } from "@resilience/db-session"
import { Domain } from "@resilience/domain"
import { Variables } from "@resilience/environment"
import { Migrator, ProcessExit, SchemaName } from "@resilience/schema"
import { Cause, Console, Effect, Exit, Runtime } from "effect"
import type { Config } from "effect"

const exitCodes = ProcessExit.codes

const program: Effect.Effect<number, Config.ConfigError> = Effect.gen(function*() {
  const schema = yield* SchemaName.config(Variables.schema)
  const result = yield* Effect.result(Migrator.run(schema, Domain.components))
  if (result._tag === "Success") {
    const applied = result.success.map((migration) => `${migration.component}:${migration.version}`)
    yield* Console.log(
      applied.length === 0
        ? `schema ${schema} is up to date (nothing pending)`
        : `schema ${schema} migrated: ${applied.join(", ")}`
    )
    return exitCodes.ok
  }
  const code = ProcessExit.ofDatabaseError(result.failure)
  const what = code === exitCodes.unavailable
    ? "database unavailable, try again later"
    : code === exitCodes.misconfigured
    ? "database misconfigured"
    : "migration failed"
  yield* Console.error(`${what}: ${Migrator.describeFailure(result.failure)}`)
  return code
}).pipe(Effect.provide(DbSession.layerConfig(Variables.database)))

NodeRuntime.runMain(program, {
  teardown: (exit, onExit) => {
    if (Exit.isSuccess(exit)) return onExit(typeof exit.value === "number" ? exit.value : exitCodes.ok)
    // an invalid setting (the error names the variable) is a misconfiguration; interrupts and defects as usual
    if (exit.cause.reasons.some(Cause.isFailReason)) return onExit(exitCodes.misconfigured)
    Runtime.defaultTeardown(exit, onExit)
  }
})
