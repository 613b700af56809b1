/**
 * Exit codes for a process that is stopped by a signal: a requested stop that completed cleanly is a
 * success (0), not the shell's 130; a failure is 1.
 */
import { Cause, Exit } from "effect"
import type { Runtime } from "effect"

/** A `runMain` teardown: interruption only → 0, failure → 1, success → 0. */
export const stopIsSuccess: Runtime.Teardown = (exit, onExit) => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return onExit(0)
  return onExit(1)
}
