/**
 * The deriver app, as layers: configuration from the environment (docs/configuration.md), the schema's readiness
 * (optional migrations, retried on a jittered schedule while the database does not answer), one deriver for
 * `DB_SCHEMA` once the schema is ready, a Prometheus and readiness endpoint and JSON logs. `main.ts` launches it.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { DbConfig, DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig } from "@resilience/deriver"
import { Domain } from "@resilience/domain"
import { Variables } from "@resilience/environment"
import { SchemaMigration, SchemaName } from "@resilience/schema"
import { WakeContract } from "@resilience/wake"
import { Cause, Config, Context, Deferred, Effect, Layer, Logger, Option, Result, Schema } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { PrometheusMetrics } from "effect/observability"
import { createServer } from "node:http"

/**
 * The app's own settings: `DERIVER_MIGRATE` (run the schema's migrations at start; default false) and
 * `DERIVER_METRICS_PORT` (Prometheus endpoint `GET /metrics`; default 9464; 0 picks a free port).
 *
 * @since 0.1.0
 */
export const appConfig = Config.all({
  migrate: Config.Boolean(Variables.deriverApp.migrate).pipe(Config.withDefault(false)),
  metricsPort: Config.schema(
    Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 0, maximum: 65535 })),
    Variables.deriverApp.metricsPort
  ).pipe(
    Config.withDefault(9464)
  )
})

/**
 * Every setting of the process, read and validated together before anything touches the database
 * (docs/configuration.md: nothing runs on a half-valid configuration): the database's (`DATABASE_URL`, `DB_*`),
 * `DB_SCHEMA`, the deriver's (`DERIVER_*`) and the app's own.
 *
 * @since 0.2.0
 */
export class Settings extends Context.Service<Settings, {
  readonly database: DbConfig.Options
  readonly schema: SchemaName.SchemaName
  readonly deriver: DeriverConfig.DeriverConfig
  readonly migrate: boolean
  readonly metricsPort: number
}>()("@resilience/deriver-app/Settings") {
  /** Reads the whole configuration from the environment; fails with the first invalid setting. */
  static readonly layer = Layer.effect(
    Settings,
    Effect.gen(function*() {
      const database = yield* DbConfig.config(Variables.database)
      const schema = yield* SchemaName.config(Variables.schema)
      const deriver = yield* DeriverConfig.config(Variables.deriver)
      const { metricsPort, migrate } = yield* appConfig
      return { database, schema, deriver, migrate, metricsPort }
    })
  )
}

/**
 * The database session, from {@link Settings}.
 *
 * @since 0.2.0
 */
export const sessionLayer = Layer.unwrap(
  Effect.map(Effect.service(Settings), (settings) => DbSession.layer(settings.database))
)

/**
 * The `SchemaMigration` service of `@resilience/schema` for `DB_SCHEMA`: migrated (`DERIVER_MIGRATE=true`) or
 * found migrated, in the background, whether or not the database answers at start.
 *
 * @since 0.3.0
 */
export const schemaMigrationLayer: Layer.Layer<SchemaMigration.SchemaMigration, never, Settings | DbSession> = Layer
  .unwrap(
    Effect.map(
      Effect.service(Settings),
      ({ migrate, schema }) =>
        SchemaMigration.layer({ schema, components: Domain.components, migrate }).pipe(Layer.orDie)
    )
  )

/**
 * Whether the deriver's loop is alive: completed with the reason when the poller or a worker died of a defect
 * outside a handler (`Deriver.died`). `/healthz` says so and `main.ts` ends the process non-zero.
 *
 * @since 0.2.0
 */
export class Liveness extends Context.Service<Liveness, { readonly died: Deferred.Deferred<string> }>()(
  "@resilience/deriver-app/Liveness"
) {
  /** A live process. */
  static readonly layer = Layer.effect(Liveness, Effect.map(Deferred.make<string>(), (died) => ({ died })))
}

/**
 * The running deriver's wake (`Deriver.wake`), once it runs; `POST /wake` calls it.
 *
 * @since 0.3.0
 */
export class Wakes extends Context.Service<Wakes, {
  readonly deriver: Deferred.Deferred<Deriver.Deriver>
}>()("@resilience/deriver-app/Wakes") {
  /** No deriver yet. */
  static readonly layer = Layer.effect(Wakes, Effect.map(Deferred.make<Deriver.Deriver>(), (deriver) => ({ deriver })))
}

/** The first line of a cause's pretty print: what died, without the stack. */
const reasonOf = (cause: Cause.Cause<unknown>): string => Cause.pretty(cause).split("\n")[0] ?? "unknown"

/**
 * Once the schema is ready, the deriver for `DB_SCHEMA` with the domain's handlers, until the layer is
 * released (SIGTERM/SIGINT through `NodeRuntime.runMain`). The process serves `/metrics` and `/readyz` meanwhile.
 *
 * @since 0.1.0
 */
export const deriverLayer = Layer.effectDiscard(
  Effect.gen(function*() {
    const { deriver: config, schema } = yield* Settings
    const readiness = yield* SchemaMigration.SchemaMigration
    const liveness = yield* Liveness
    const wakes = yield* Wakes
    yield* Effect.forkScoped(
      readiness.await.pipe(
        Effect.andThen(Deriver.start({ schema, handlers: Domain.handlers(schema), config })),
        Effect.tap((deriver) => Deferred.succeed(wakes.deriver, deriver)),
        Effect.flatMap((deriver) => deriver.died),
        Effect.flatMap((cause) => Deferred.succeed(liveness.died, reasonOf(cause))),
        Effect.ignore
      )
    )
  })
)

/**
 * `GET /readyz`: 200 once the schema is ready and the deriver polls, 503 before (with `Retry-After: 1`).
 *
 * @since 0.1.0
 */
export const readyzRoute = HttpRouter.add(
  "GET",
  "/readyz",
  Effect.flatMap(
    Effect.service(SchemaMigration.SchemaMigration),
    (readiness) =>
      Effect.map(readiness.status, (status) =>
        status._tag === "Ready"
          ? HttpServerResponse.jsonUnsafe({ status: "ready" })
          : HttpServerResponse.jsonUnsafe({ status: status._tag }, { status: 503, headers: { "retry-after": "1" } }))
  )
)

/**
 * `GET /healthz`: 200 `{"status":"ok"}` while the loop lives, 503 `{"status":"dead","reason":…}` once it died
 * of a defect (the process is about to exit non-zero).
 *
 * @since 0.2.0
 */
export const healthzRoute = HttpRouter.add(
  "GET",
  "/healthz",
  Effect.gen(function*() {
    const liveness = yield* Liveness
    if (!(yield* Deferred.isDone(liveness.died))) return HttpServerResponse.jsonUnsafe({ status: "ok" })
    const reason = yield* Deferred.await(liveness.died)
    return HttpServerResponse.jsonUnsafe({ status: "dead", reason }, { status: 503 })
  })
)

/** A wake body is a schema name in a small JSON object: anything longer is refused unread. */
const maxWakeBodyBytes = 1024

/**
 * `POST /wake` (`@resilience/wake`'s contract): `{"schema": "<DB_SCHEMA>"}` makes the deriver poll now, or once
 * more after the poll in flight (`Deriver.wake`, coalesced), and answers `202 {"decision": …}` at once; `400`
 * naming the field for a bad body, `413` for a body over 1 KiB, `404` for another schema, `503` before the
 * deriver runs (its first poll comes anyway).
 *
 * @since 0.3.0
 */
export const wakeRoute = HttpRouter.add(
  "POST",
  WakeContract.path,
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const length = Number(request.headers["content-length"] ?? "0")
    if (length > maxWakeBodyBytes) {
      return HttpServerResponse.jsonUnsafe({ detail: `Wake body over ${maxWakeBodyBytes} bytes` }, { status: 413 })
    }
    const body = yield* Effect.orElseSucceed(request.text, () => "")
    const decoded = WakeContract.decodeText(body)
    if (Result.isFailure(decoded)) {
      return HttpServerResponse.jsonUnsafe({ detail: decoded.failure.detail }, { status: 400 })
    }
    const { schema } = yield* Settings
    if (decoded.success.schema !== schema) {
      return HttpServerResponse.jsonUnsafe({
        detail: `This deriver serves schema ${JSON.stringify(schema)}, not ${JSON.stringify(decoded.success.schema)}`
      }, { status: 404 })
    }
    const wakes = yield* Wakes
    const deriver = yield* Deferred.poll(wakes.deriver)
    if (Option.isNone(deriver)) {
      return HttpServerResponse.jsonUnsafe({ detail: "The deriver has not started yet" }, {
        status: 503,
        headers: { "retry-after": "1" }
      })
    }
    const decision = yield* Effect.flatMap(deriver.value, (running) => running.wake)
    return HttpServerResponse.jsonUnsafe({ decision } satisfies WakeContract.Accepted, { status: 202 })
  })
)

/**
 * The Prometheus endpoint (`GET /metrics`), `GET /readyz` and `GET /healthz` on `DERIVER_METRICS_PORT`.
 *
 * @since 0.1.0
 */
export const metricsLayer = Layer.unwrap(Effect.gen(function*() {
  const { metricsPort } = yield* Settings
  return HttpRouter.serve(
    Layer.mergeAll(PrometheusMetrics.layerHttp({ path: "/metrics" }), readyzRoute, healthzRoute, wakeRoute)
  ).pipe(
    Layer.provide(NodeHttpServer.layer(createServer, { port: metricsPort, host: "0.0.0.0" }))
  )
}))

/**
 * One JSON object per log line.
 *
 * @since 0.1.0
 */
export const loggerLayer = Logger.layer([Logger.consoleJson])

/**
 * The whole app. {@link Settings} is built first: an invalid setting stops the process before its first
 * database attempt.
 *
 * @since 0.1.0
 */
export const layer = Layer.mergeAll(deriverLayer, metricsLayer).pipe(
  Layer.provideMerge(schemaMigrationLayer),
  Layer.provideMerge(Liveness.layer),
  Layer.provideMerge(Wakes.layer),
  Layer.provideMerge(sessionLayer),
  Layer.provideMerge(Settings.layer),
  Layer.provide(loggerLayer)
)
