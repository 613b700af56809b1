/**
 * A tenant schema's migration in the background: its migrations run (or a check that none is pending), for
 * processes that start whether or not the database answers, and a fail-fast check of whether it is ready yet. A background
 * fiber makes one attempt (one checkout) at a time: it runs the migrations (under the schema's advisory lock,
 * see {@link Migrator.run}) or, for a process that does not migrate, checks that none is pending. Between
 * attempts it sleeps on the jittered poll backoff of `@resilience/jitter` (1 → 2 → 4 → … → 30 s, each sleep
 * uniform in ±50 %), never a fixed period. An unavailable database, a transient statement failure or pending
 * migrations mean "try again later"; only a misconfiguration (bad credentials, unknown database, no privilege)
 * stops the attempts, and {@link Readiness.await} fails with {@link SchemaMisconfigured} naming it.
 *
 * Until the schema is ready, {@link Readiness.ensure} fails at once with a `DatabaseUnavailable` (the last
 * attempt's, or `NotAcceptingConnections` while the first attempt runs or migrations are pending): an API
 * answers it with a 503 and `Retry-After` without a checkout of its own.
 *
 * A process holds one migration of its schema, the {@link SchemaMigration} service, built by {@link layer};
 * {@link ensure} and {@link awaitReady} read it from the context.
 *
 * @since 0.1.0
 */
import { Classify, DatabaseMisconfigured, DatabaseUnavailable, DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import { PollBackoff } from "@resilience/jitter"
import type { InvalidParameter } from "@resilience/parameters"
import { Context, Deferred, Duration, Effect, Layer, Metric, Ref, Schema } from "effect"
import type { Scope } from "effect"
import * as Migrator from "./Migrator.ts"
import type * as SchemaName from "./SchemaName.ts"

/**
 * What to make ready.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly schema: SchemaName.SchemaName
  readonly components: ReadonlyArray<Migrator.Component>
  /** Run the migrations (`true`), or only wait until none is pending (`false`: someone else migrates). */
  readonly migrate: boolean
  /** The schedule between attempts (default: the poll backoff's defaults, 1 s → 30 s, ratio 0.5). */
  readonly backoff?: PollBackoff.Options | undefined
}

/**
 * Where the schema stands: `Starting` (first attempt running), `Waiting` (the last attempt said "later":
 * `reason` is the database's unavailability reason, `Pending` or `QueryFailed`), `Ready`, or `Misconfigured`
 * (attempts stopped).
 *
 * @since 0.1.0
 * @category models
 */
export type Status =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Waiting"; readonly reason: string; readonly detail: string; readonly error?: DbError }
  | { readonly _tag: "Ready" }
  | { readonly _tag: "Misconfigured"; readonly detail: string; readonly error: DbError }

/**
 * The database rejected this deployment's configuration while making the schema ready: no later attempt can
 * help; the process should stop with this message.
 *
 * @since 0.1.0
 * @category errors
 */
export class SchemaMisconfigured extends Schema.TaggedError<SchemaMisconfigured>()("SchemaMisconfigured", {
  schema: Schema.String,
  code: Schema.UndefinedOr(Schema.String),
  message: Schema.String
}) {}

/**
 * Whether a schema is migrated yet, as one process sees it: its status, a wait for it, and a fail-fast check.
 *
 * @since 0.3.0
 * @category models
 */
export interface Readiness {
  readonly status: Effect.Effect<Status>
  /** Succeeds when the schema is ready; fails when the attempts stopped on a misconfiguration. */
  readonly await: Effect.Effect<void, SchemaMisconfigured>
  /**
   * Succeeds at once when ready; otherwise fails at once (no checkout) with a `DatabaseUnavailable`, or with
   * the `DatabaseMisconfigured` that stopped the attempts.
   */
  readonly ensure: Effect.Effect<void, DatabaseUnavailable | DatabaseMisconfigured>
}

/**
 * The schema's migration in this process, as a service: one per process, built by {@link layer} (or provided
 * from {@link start} in tests).
 *
 * @since 0.3.0
 * @category services
 */
export class SchemaMigration
  extends Context.Service<SchemaMigration, Readiness>()("@resilience/schema/SchemaMigration")
{}

/**
 * The former name of {@link Readiness}: "gate" means admission control in this repository (the API's request
 * gate, the deriver's checkout gate).
 *
 * @since 0.2.0
 * @category models
 * @deprecated since 0.3.0: use {@link Readiness} (the same shape under its new name); removed in the next minor
 * release.
 */
export type Gate = Readiness

/**
 * The former name of the {@link SchemaMigration} service: "gate" means admission control in this repository (the
 * API's request gate, the deriver's checkout gate).
 *
 * @since 0.2.0
 * @category services
 * @deprecated since 0.3.0: use {@link SchemaMigration} (the same service under its new name); removed in the next
 * minor release.
 */
export const SchemaGate = SchemaMigration

/**
 * The former name of the {@link SchemaMigration} service's type.
 *
 * @since 0.2.0
 * @category services
 * @deprecated since 0.3.0: use {@link SchemaMigration} (the same service under its new name); removed in the next
 * minor release.
 */
export type SchemaGate = SchemaMigration

/**
 * `schema_migrated` (0 or 1): 1 once this process found its tenant schema migrated (it ran the migrations, or
 * found none pending), 0 before. Named `schema_ready` while this module was in `@resilience/deriver`.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: the gauge reaches a dashboard through the
 * application's exporter.
 * @since 0.2.0
 * @category metrics
 */
export const migratedGauge = Metric.gauge("schema_migrated", {
  description: "1 once this process found its tenant schema migrated (migrations run or none pending), 0 before"
})

/**
 * `schema_migration_attempts_total{outcome}`: the schema's migration attempts (migration runs or pending checks),
 * by outcome: `ready`, `unavailable`, `pending`, `failed`, `misconfigured`. Named `schema_gate_attempts_total` in 0.2.0,
 * and `schema_readiness_checks_total` while this module was in `@resilience/deriver`.
 *
 * @deprecated Since 0.3.0; goes in 0.4.0. Internal: the counter reaches a dashboard through the
 * application's exporter.
 * @since 0.2.0
 * @category metrics
 */
export const attemptsTotal = Metric.counter("schema_migration_attempts_total", {
  description: "Schema migration attempts (migration runs or pending checks), by outcome",
  incremental: true
})

const notYet = (schema: string, detail: string) =>
  new DatabaseUnavailable({
    reason: "NotAcceptingConnections",
    code: undefined,
    message: `schema ${schema} is not ready yet: ${detail}`,
    elapsedMillis: 0
  })

const seconds = (duration: Duration.Duration) => `${(Duration.toMillis(duration) / 1000).toFixed(1)} s`

/**
 * Starts making the schema ready in the background of the current scope and returns its migration. Invalid
 * backoff options fail at once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const start = Effect.fnUntraced(function*(
  options: Options
): Effect.fn.Return<Readiness, InvalidParameter.InvalidParameter, DbSession | Scope.Scope> {
  const { schema } = options
  const backoff = yield* PollBackoff.make(options.backoff)
  const status = yield* Ref.make<Status>({ _tag: "Starting" })
  const done = yield* Deferred.make<void, SchemaMisconfigured>()
  const session = yield* DbSession
  const check: Effect.Effect<number, DbError> = (options.migrate
    ? Effect.as(Migrator.run(schema, options.components), 0)
    : Migrator.pending(schema, options.components)).pipe(Effect.provideService(DbSession, session))
  const count = (outcome: string) => Metric.update(Metric.withAttributes(attemptsTotal, { outcome }), 1)

  const later = (next: Status & { readonly _tag: "Waiting" }, outcome: string) =>
    Effect.gen(function*() {
      yield* Ref.set(status, next)
      yield* count(outcome)
      const delay = yield* backoff.advance
      // the driver's own words (and code) after the reason: what an operator needs to tell a refused port from a
      // full server or a pooler that gave up
      const cause = next.error?._tag === "DatabaseUnavailable"
        ? ` (${next.error.message}${next.error.code === undefined ? "" : ` [${next.error.code}]`})`
        : ""
      yield* Effect.logWarning(`${next.detail}; retrying in ${seconds(delay)}${cause}`).pipe(
        Effect.annotateLogs({ schema, reason: next.reason })
      )
      return delay
    })

  const loop: Effect.Effect<void> = Effect.gen(function*() {
    while (true) {
      const result = yield* Effect.result(check)
      if (result._tag === "Success") {
        if (result.success === 0) {
          yield* Ref.set(status, { _tag: "Ready" })
          yield* count("ready")
          yield* Metric.update(migratedGauge, 1)
          yield* Effect.logInfo("schema ready").pipe(Effect.annotateLogs({ schema, migrated: options.migrate }))
          yield* Deferred.succeed(done, undefined)
          return
        }
        yield* Effect.sleep(
          yield* later({
            _tag: "Waiting",
            reason: "Pending",
            detail: `waiting for ${result.success} migration(s) of schema ${schema} (run by another process)`
          }, "pending")
        )
        continue
      }
      const error = result.failure
      if (Classify.isMisconfigured(error)) {
        const detail = `database misconfigured for schema ${schema}: ${Migrator.describeFailure(error)}`
        yield* Ref.set(status, { _tag: "Misconfigured", detail, error })
        yield* count("misconfigured")
        yield* Effect.logError(detail).pipe(Effect.annotateLogs({ schema }))
        yield* Deferred.fail(done, new SchemaMisconfigured({ schema, code: error.code, message: detail }))
        return
      }
      const reason = error._tag === "DatabaseUnavailable" ? error.reason : error._tag
      const detail = error._tag === "DatabaseUnavailable"
        ? `database unavailable (${error.reason})`
        : `schema ${schema} not ready (${Migrator.describeFailure(error)})`
      yield* Effect.sleep(
        yield* later(
          { _tag: "Waiting", reason, detail, error },
          error._tag === "DatabaseUnavailable" ? "unavailable" : "failed"
        )
      )
    }
  })
  yield* Metric.update(migratedGauge, 0)
  yield* Effect.forkScoped(loop)

  const ensure = Effect.flatMap(Ref.get(status), (
    current
  ): Effect.Effect<void, DatabaseUnavailable | DatabaseMisconfigured> => {
    switch (current._tag) {
      case "Ready":
        return Effect.void
      case "Starting":
        return Effect.fail(notYet(schema, "first check running"))
      case "Misconfigured":
        return Effect.fail(
          current.error._tag === "DatabaseMisconfigured"
            ? current.error
            : new DatabaseMisconfigured({ code: current.error.code, message: current.detail, elapsedMillis: 0 })
        )
      case "Waiting":
        return Effect.fail(
          current.error?._tag === "DatabaseUnavailable" ? current.error : notYet(schema, current.detail)
        )
    }
  })
  return { status: Ref.get(status), await: Deferred.await(done), ensure } satisfies Readiness
})

/**
 * The {@link SchemaMigration} service: {@link start}ed when the layer is built, its attempts stopped when the layer
 * is released. Invalid backoff options fail the layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<SchemaMigration, InvalidParameter.InvalidParameter, DbSession> =>
  Layer.effect(SchemaMigration, start(options))

/**
 * Fails at once while the process's schema is not ready: with the database's unavailability (an API's 503), or
 * its misconfiguration (an opaque 500; the process stops). See {@link Readiness.ensure}.
 *
 * @since 0.2.0
 * @category accessors
 */
export const ensure: Effect.Effect<void, DatabaseUnavailable | DatabaseMisconfigured, SchemaMigration> = Effect
  .flatMap(Effect.service(SchemaMigration), (migration) => migration.ensure)

/**
 * Waits until the process's schema is ready; fails when the attempts stopped on a misconfiguration. See
 * {@link Readiness.await}.
 *
 * @since 0.2.0
 * @category accessors
 */
export const awaitReady: Effect.Effect<void, SchemaMisconfigured, SchemaMigration> = Effect.flatMap(
  Effect.service(SchemaMigration),
  (migration) => migration.await
)

/**
 * Where the process's schema stands. See {@link Status}.
 *
 * @since 0.2.0
 * @category accessors
 */
export const status: Effect.Effect<Status, never, SchemaMigration> = Effect.flatMap(
  Effect.service(SchemaMigration),
  (migration) => migration.status
)
