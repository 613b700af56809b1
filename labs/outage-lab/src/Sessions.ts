/**
 * The database sessions of one policy: the real `DbSession` (`DB_POOL_CLASS=null`, the `pg` driver, a fresh
 * connection through PgBouncer per checkout, as in the incident), counted, and for the policies without
 * failfast wrapped in the removed checkout loop with no connect timeout of note (the old code had none; the
 * session's bound is set to its maximum, one hour).
 */
import { DbSession, type InvalidTlsSetting } from "@resilience/db-session"
import { Model } from "@resilience/fleet-sim"
import { Context, Effect, Layer } from "effect"
import * as CountedSession from "./CountedSession.ts"
import type * as Counters from "./Counters.ts"
import * as RemovedRetry from "./RemovedRetry.ts"

/** Whether a policy makes one attempt per checkout (the fix) rather than the removed loop. */
export const failsFast = (policy: Model.Policy): boolean =>
  Model.policy(policy, Model.incident.poll).acquisition.kind === "failfast"

/** Whether a policy jitters its polls (ratio 0.5, startup window = max interval). */
export const jitters = (policy: Model.Policy): boolean => Model.policy(policy, Model.incident.poll).poll.ratio > 0

/** A session layer for one role under one policy. */
export const layer = (options: {
  readonly url: string
  readonly policy: Model.Policy
  readonly role: Counters.Role
  readonly counters: Counters.Counters
  readonly connectTimeoutSeconds: number
}): Layer.Layer<DbSession, InvalidTlsSetting> =>
  Layer.effect(
    DbSession,
    Effect.gen(function*() {
      const failfast = failsFast(options.policy)
      const built = yield* Layer.build(DbSession.layer({
        url: options.url,
        connectTimeout: `${failfast ? options.connectTimeoutSeconds : 3600} seconds`,
        poolClass: "null",
        poolSize: 1,
        driver: "pg",
        applicationName: `lab-${options.role}`
      }))
      const real = Context.get(built, DbSession)
      const counted = CountedSession.wrap(real, options.counters, options.role)
      return failfast ? counted : RemovedRetry.wrap(counted)
    })
  )
