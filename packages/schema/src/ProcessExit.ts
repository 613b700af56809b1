/**
 * The exit codes of the processes built on a tenant schema. A long-running process (an API, a worker) run with
 * `NodeRuntime.runMain` uses {@link teardown}: a stop asked for by SIGTERM or SIGINT that completed its graceful
 * shutdown is a success (0), as orchestrators and init systems expect, not the shell's 130; every other outcome
 * keeps Effect's default (1, or a code the failure carries). A one-shot command (a migration before a rollout)
 * says its outcome with {@link codes}: 0 done, 75 (`EX_TEMPFAIL`) try again later, 78 (`EX_CONFIG`) fix the
 * configuration, 1 failed.
 *
 * @since 0.2.0
 */
import { Classify } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import { Cause, Exit, Runtime } from "effect"

/**
 * A `runMain` teardown: interruption only → 0, otherwise `Runtime.defaultTeardown`.
 *
 * @since 0.2.0
 * @category teardown
 */
export const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

/**
 * The exit codes of a one-shot command: `ok` 0; `failed` 1 (e.g. a migration failed); `unavailable` 75
 * (`EX_TEMPFAIL`: the database is unavailable or the statement failed for a passing reason, run it again later);
 * `misconfigured` 78 (`EX_CONFIG`: an invalid setting, or the database rejected the configuration).
 *
 * @since 0.2.0
 * @category codes
 */
export const codes = { ok: 0, failed: 1, unavailable: 75, misconfigured: 78 } as const

/**
 * The exit code a command's database failure means, by db-session's table (`Classify`): temporary → 75,
 * misconfigured → 78, anything else → 1.
 *
 * @since 0.2.0
 * @category codes
 */
export const ofDatabaseError = (error: DbError): number =>
  Classify.isTemporary(error)
    ? codes.unavailable
    : Classify.isMisconfigured(error)
    ? codes.misconfigured
    : codes.failed
