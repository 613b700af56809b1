/**
 * The exit code of a worker process run with `NodeRuntime.runMain`: a stop asked for by SIGTERM or SIGINT that
 * completed its graceful shutdown is a success (0), as orchestrators and init systems expect, not the shell's
 * 130; every other outcome keeps Effect's default (1, or a code the failure carries).
 *
 * @since 0.2.0
 */
import { Cause, Exit, Runtime } from "effect"

/**
 * A `runMain` teardown: interruption only → 0, otherwise `Runtime.defaultTeardown`.
 *
 * @since 0.2.0
 */
export const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
