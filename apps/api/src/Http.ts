/**
 * The implementation of the API contract (`@resilience/api-contract`): thin handlers over `@resilience/domain`, the two auth middlewares,
 * and the server layer that composes them with the error mapping of `@resilience/api-errors`.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as Admission from "@resilience/admission"
import { Api, Errors, Security } from "@resilience/api-contract"
import { ApiMiddleware, HttpErrors, RequestLimits, Validation } from "@resilience/api-errors"
import { DbSession } from "@resilience/db-session"
import { Idempotency, Messages, QueueStatus, Representations, type SchemaName, Workspaces } from "@resilience/domain"
import { SchemaMigration } from "@resilience/schema"
import { WakeSender } from "@resilience/wake"
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApiBuilder, HttpApiScalar } from "effect/http-api"
import { PrometheusMetrics } from "effect/observability"
import { timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import * as SchemaReady from "./SchemaReady.ts"
import { AppSettings } from "./Settings.ts"

const constantTimeEquals = (a: string, b: string): boolean => {
  const left = Buffer.from(a, "utf8")
  const right = Buffer.from(b, "utf8")
  return left.length === right.length && timingSafeEqual(left, right)
}

const defaultIdempotencyRetentionSeconds = 86_400

const noToken = new Errors.Unauthorized({ detail: "Missing bearer token (Authorization: Bearer <token>)" })

/**
 * The admin token check: no token 401, another token 403. No database.
 *
 * @since 0.1.0
 */
export const AdminAuthLive = Layer.effect(
  Security.AdminAuth,
  Effect.gen(function*() {
    const settings = yield* AppSettings
    const expected = Redacted.value(settings.adminToken)
    return Security.AdminAuth.of({
      admin: (httpEffect, { credential }) => {
        const token = Redacted.value(credential)
        if (token === "") return Effect.fail(noToken)
        if (!constantTimeEquals(token, expected)) {
          return Effect.fail(new Errors.Forbidden({ detail: "This token may not create workspaces" }))
        }
        return httpEffect
      }
    })
  })
)

/**
 * The workspace token extraction: no token 401; the token itself is checked by the handler, in the
 * request's one database checkout.
 *
 * @since 0.1.0
 */
export const WorkspaceAuthLive = Layer.succeed(
  Security.WorkspaceAuth,
  Security.WorkspaceAuth.of({
    workspace: (httpEffect, { credential }) =>
      Redacted.value(credential) === ""
        ? Effect.fail(noToken)
        : Effect.provideService(httpEffect, Security.BearerToken, credential)
  })
)

/**
 * Runs `use` for `workspace` after checking the request's token, all on one checkout behind the admission gate:
 * unknown workspace 404, another workspace's token 403. Database errors and shed requests become defects, which
 * the API's `DatabaseErrors` middleware answers (503 with Retry-After, or an opaque 500).
 *
 * @since 0.1.0
 */
export const withWorkspace = <A, E, R>(
  workspace: string,
  use: (schema: SchemaName.SchemaName) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const { schema } = yield* AppSettings
    const token = yield* Security.BearerToken
    const db = yield* DbSession
    yield* SchemaMigration.ensure
    return yield* Admission.Gate.run(db.oneCheckout(Effect.gen(function*() {
      const verification = yield* Workspaces.verifyToken(schema, workspace, Redacted.value(token))
      if (verification === "not-found") {
        return yield* new Errors.NotFound({ detail: `Workspace ${JSON.stringify(workspace)} does not exist` })
      }
      if (verification === "forbidden") {
        return yield* new Errors.Forbidden({
          detail: `This token does not grant access to workspace ${JSON.stringify(workspace)}`
        })
      }
      return yield* use(schema)
    })))
  }).pipe(HttpErrors.orDieDbErrors)

/**
 * `POST /v1/workspaces`.
 *
 * @since 0.1.0
 */
export const AdminHandlers = HttpApiBuilder.group(
  Api.Api,
  "admin",
  (handlers) =>
    handlers.handle("createWorkspace", ({ payload }) =>
      Effect.gen(function*() {
        const { schema } = yield* AppSettings
        yield* SchemaMigration.ensure
        return yield* Admission.Gate.run(Workspaces.create(schema, payload.name)).pipe(
          Effect.catchTag(
            "WorkspaceExists",
            (error) =>
              Effect.fail(new Errors.Conflict({ detail: `Workspace ${JSON.stringify(error.name)} already exists` }))
          )
        )
      }).pipe(HttpErrors.orDieDbErrors))
)

/**
 * The workspace's routes.
 *
 * @since 0.1.0
 */
export const WorkspaceHandlers = HttpApiBuilder.group(Api.Api, "workspace", (handlers) =>
  handlers.handleAll({
    appendMessages: ({ headers, params, payload }) =>
      withWorkspace(params.workspace, (schema) => {
        const key = headers["idempotency-key"]
        const options = { deriveAt: payload.deriveAt === undefined ? undefined : Date.parse(payload.deriveAt) }
        if (key === undefined) {
          return Effect.map(
            Messages.append(schema, params.workspace, params.session, payload.messages, options),
            (response) => ({ response, fresh: true })
          )
        }
        return Effect.gen(function*() {
          const { idempotencyRetentionSeconds } = yield* AppSettings
          const outcome = yield* Messages.appendOnce(schema, params.workspace, params.session, payload.messages, {
            key,
            retentionSeconds: idempotencyRetentionSeconds ?? defaultIdempotencyRetentionSeconds
          }, options)
          return { response: outcome.response, fresh: !outcome.replayed }
        }).pipe(
          Effect.catchTag("IdempotencyKeyReused", () =>
            Effect.fail(
              new Errors.IdempotencyKeyReused({
                detail: "This Idempotency-Key was used for a different request; use a new key for a new request"
              })
            ))
        )
      }).pipe(
        // the transaction has committed: tell the deriver (fire-and-forget; a replay enqueued nothing new)
        Effect.tap(({ fresh, response }) =>
          fresh && response.enqueued > 0
            ? Effect.flatMap(Effect.service(WakeSender.WakeSender), (sender) => sender.wake)
            : Effect.void
        ),
        Effect.map(({ response }) => response)
      ),
    queueStatus: ({ params }) =>
      withWorkspace(params.workspace, (schema) => QueueStatus.forWorkspace(schema, params.workspace)),
    representation: ({ params }) =>
      withWorkspace(params.workspace, (schema) =>
        Effect.flatMap(
          Representations.get(schema, params.workspace, params.peer),
          Option.match({
            onNone: () =>
              Effect.fail(
                new Errors.NotFound({ detail: `Nothing derived yet for peer ${JSON.stringify(params.peer)}` })
              ),
            onSome: Effect.succeed
          })
        ))
  }))

/**
 * `/healthz`, `/readyz`, `/metrics`.
 *
 * @since 0.1.0
 */
export const SystemHandlers = HttpApiBuilder.group(Api.Api, "system", (handlers) =>
  handlers.handleAll({
    healthz: () => Effect.succeed({ status: "ok" }),
    readyz: () =>
      Effect.andThen(
        SchemaMigration.ensure,
        Effect.flatMap(Effect.service(Admission.ReadinessProbe.ReadinessProbe), (probe) => probe.check)
      ).pipe(
        Effect.as({ status: "ready" }),
        HttpErrors.orDieDbErrors
      ),
    metrics: () => PrometheusMetrics.format()
  }))

/**
 * Every route: the API, `/openapi.json`, `/docs` (Scalar), and the router-level error mapping and body limit.
 *
 * @since 0.1.0
 */
export const routes = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* AppSettings
  const api = HttpApiBuilder.layer(Api.Api, { openapiPath: "/openapi.json" }).pipe(
    Layer.provide([AdminHandlers, WorkspaceHandlers, SystemHandlers]),
    Layer.provide([
      AdminAuthLive,
      WorkspaceAuthLive,
      Validation.layer,
      ApiMiddleware.layer({ retryAfter: settings.retryAfter })
    ])
  )
  return Layer.mergeAll(
    api,
    HttpApiScalar.layer(Api.Api, { path: "/docs" }),
    HttpErrors.layerRouter({ retryAfter: settings.retryAfter }),
    RequestLimits.layerRouter({ maxBodyBytes: settings.maxBodyBytes })
  )
}))

/**
 * Logs `api listening` (with the address) once the server listens; readiness is `/readyz`.
 *
 * @since 0.1.0
 */
export const readyLog = Layer.effectDiscard(Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  const address = server.address
  yield* Effect.logInfo("api listening").pipe(
    Effect.annotateLogs({
      url: HttpServer.formatAddress(address),
      port: "port" in address ? address.port : undefined
    })
  )
}))

/**
 * Prunes expired `Idempotency-Key`s of the schema for the server's lifetime, on a jittered period
 * (`Idempotency.pruneLoop`).
 *
 * @since 0.1.0
 */
export const idempotencyPruning = Layer.effectDiscard(Effect.gen(function*() {
  const settings = yield* AppSettings
  yield* Effect.forkScoped(
    Idempotency.pruneLoop(settings.schema, settings.idempotencyRetentionSeconds ?? defaultIdempotencyRetentionSeconds)
  )
}))

/**
 * The admission gate (`settings.admission`) and the database readiness probe behind it (single-flight, cached
 * for `settings.readinessCacheMillis`).
 *
 * @since 0.2.0
 */
export const admission = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* AppSettings
  return Admission.ReadinessProbe.layer({ cacheMillis: settings.readinessCacheMillis }).pipe(
    Layer.provideMerge(
      Layer.effect(Admission.Gate.Gate, Admission.Gate.make(settings.admission ?? Admission.Settings.defaults))
    )
  )
}))

/**
 * The HTTP server on `settings.port`, serving at once; the schema becomes ready in the background
 * (the `SchemaMigration` service of `@resilience/schema`, built by `SchemaReady.layer`, provided to the caller too). Needs `AppSettings` and `DbSession`.
 *
 * @since 0.1.0
 */
export const server = Layer.unwrap(Effect.gen(function*() {
  const settings = yield* AppSettings
  return HttpRouter.serve(routes).pipe(
    Layer.provide(admission),
    Layer.provide(WakeSender.layer(settings.wake ?? Option.none())),
    Layer.provideMerge(NodeHttpServer.layer(createServer, { port: settings.port, host: settings.host })),
    (serving) => Layer.provideMerge(readyLog, serving),
    Layer.provideMerge(idempotencyPruning),
    Layer.provideMerge(SchemaReady.layer)
  )
}))
