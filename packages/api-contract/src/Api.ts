/**
 * The API definition: endpoints, payloads, responses, errors and security, and nothing of their
 * implementation. The server implements it (`apps/api`); clients derive from it
 * (`HttpApiClient.make(Api, { baseUrl })`, or `@resilience/api-client`); the OpenAPI document is generated
 * from it. Payloads and responses are the domain's schemas (`@resilience/domain/Model`).
 *
 * @since 0.1.0
 */
import { ApiMiddleware, Validation } from "@resilience/api-errors"
import { Model, Names } from "@resilience/model"
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Conflict, Forbidden, IdempotencyKeyReused, NotFound } from "./Errors.ts"
import { AdminAuth, WorkspaceAuth } from "./Security.ts"

/**
 * Most messages accepted in one request.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxMessagesPerRequest = 100

const described = <S extends Schema.Top>(schema: S, description: string) => schema.annotate({ description })

/**
 * `POST /v1/workspaces` body.
 *
 * @since 0.1.0
 * @category schemas
 */
export const CreateWorkspace = Schema.Struct({
  name: described(Names.WorkspaceName, "1–64 characters of A–Z, a–z, 0–9, _ and -, starting with a letter or digit")
})

/**
 * An instant as ISO 8601 text with a time zone (`2026-12-02T15:00:00Z`, `…+01:00`), decoded to epoch milliseconds.
 *
 * @since 0.3.0
 * @category schemas
 */
export const Instant = Schema.String.check(
  Schema.makeFilter(
    (text: string) =>
      /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d)$/.test(text) && !Number.isNaN(Date.parse(text))
        ? true
        : "must be an ISO 8601 date-time with a time zone, e.g. 2026-12-02T15:00:00Z",
    { description: "an ISO 8601 date-time with a time zone, e.g. 2026-12-02T15:00:00Z" }
  )
)

/**
 * `POST …/messages` body: 1 to {@link maxMessagesPerRequest} messages, and optionally `deriveAt` (since 0.3.0):
 * the earliest time their representation tasks run (an earlier task of the same peer still folds whatever is
 * committed when it runs).
 *
 * @since 0.1.0
 * @category schemas
 */
export const AppendMessages = Schema.Struct({
  messages: Schema.Array(Model.NewMessage).check(Schema.isMinLength(1), Schema.isMaxLength(maxMessagesPerRequest)),
  deriveAt: Schema.optionalKey(
    described(Instant, "earliest time the representation tasks run: an ISO 8601 date-time with a time zone")
  )
})

/**
 * `/healthz` and `/readyz` body.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Status = Schema.Struct({ status: Schema.String })

/**
 * Admin: creating workspaces.
 *
 * @since 0.1.0
 * @category models
 */
export class AdminGroup extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("createWorkspace", "/v1/workspaces", {
      payload: CreateWorkspace,
      success: Model.CreatedWorkspace.pipe(HttpApiSchema.status(201)),
      error: Conflict
    })
  )
  .middleware(AdminAuth)
  .annotateMerge(OpenApi.annotations({ title: "Admin", description: "Requires the admin bearer token." }))
{}

/**
 * Headers of `POST …/messages`: an optional `Idempotency-Key` (1–255 visible ASCII characters). The same key
 * and body within the retention window answers the first request's response and stores nothing new;
 * concurrent duplicates store once; the same key with another body is a 422.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AppendHeaders = Schema.Struct({
  "idempotency-key": Schema.optional(
    described(
      Schema.String.check(Schema.isPattern(/^[\x21-\x7e]{1,255}$/)),
      "Idempotency-Key: 1–255 visible ASCII characters; resend a write with the same key when its outcome is unknown"
    )
  )
})

const WorkspaceParams = { workspace: described(Names.WorkspaceName, "workspace name") }

/**
 * A workspace's routes, under its own token.
 *
 * @since 0.1.0
 * @category models
 */
export class WorkspaceGroup extends HttpApiGroup.make("workspace")
  .add(
    HttpApiEndpoint.post("appendMessages", "/v1/workspaces/:workspace/sessions/:session/messages", {
      params: { ...WorkspaceParams, session: described(Names.SessionName, "session name") },
      payload: AppendMessages,
      headers: AppendHeaders,
      success: Model.Appended.pipe(HttpApiSchema.status(201)),
      error: [Forbidden, NotFound, IdempotencyKeyReused]
    }),
    HttpApiEndpoint.get("queueStatus", "/v1/workspaces/:workspace/queue", {
      params: WorkspaceParams,
      success: Model.QueueStatus,
      error: [Forbidden, NotFound]
    }),
    HttpApiEndpoint.get("representation", "/v1/workspaces/:workspace/peers/:peer/representation", {
      params: { ...WorkspaceParams, peer: described(Names.PeerName, "peer name") },
      success: Model.Representation,
      error: [Forbidden, NotFound]
    })
  )
  .middleware(WorkspaceAuth)
  .annotateMerge(OpenApi.annotations({ title: "Workspace", description: "Requires the workspace's bearer token." }))
{}

/**
 * Health, readiness and metrics.
 *
 * @since 0.1.0
 * @category models
 */
export class SystemGroup extends HttpApiGroup.make("system", { topLevel: true })
  .add(
    HttpApiEndpoint.get("healthz", "/healthz", { success: Status }).annotate(
      OpenApi.Description,
      "Liveness: the process serves HTTP. Does not touch the database."
    ),
    HttpApiEndpoint.get("readyz", "/readyz", { success: Status }).annotate(
      OpenApi.Description,
      "Readiness: one database checkout (SELECT 1); 503 with Retry-After when the database is unavailable."
    ),
    HttpApiEndpoint.get("metrics", "/metrics", {
      success: Schema.String.pipe(HttpApiSchema.asText({ contentType: "text/plain; version=0.0.4" }))
    }).annotate(OpenApi.Description, "Prometheus metrics (text exposition format).")
  )
{}

/**
 * The API. Every endpoint may answer 400 (request validation, naming the field), 503 (database temporarily
 * unavailable, with Retry-After) and 500 (opaque).
 *
 * @since 0.1.0
 * @category models
 */
export class Api extends HttpApi.make("resilience-api")
  .add(AdminGroup)
  .add(WorkspaceGroup)
  .add(SystemGroup)
  .middleware(Validation.RequestValidation)
  .middleware(ApiMiddleware.DatabaseErrors)
  .annotateMerge(OpenApi.annotations({
    title: "Resilience API",
    version: "0.1.0",
    description:
      "One tenant schema's workspaces, messages, queue status and derived representations. Fails fast: a saturated database is a 503 with Retry-After, never a slow answer."
  }))
{}
