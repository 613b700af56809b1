/**
 * The API definition: endpoints, payloads, responses, errors and security, and nothing of their
 * implementation. Servers implement it (see `Http.ts`); clients derive from it
 * (`HttpApiClient.make(Api, { baseUrl })`); the OpenAPI document is generated from it.
 *
 * @since 0.1.0
 */
import { ApiMiddleware, Validation } from "@resilience/api-errors"
import * as Names from "@resilience/domain/Names"
import { Context, Schema } from "effect"
import type { Redacted } from "effect"
import {
  HttpApi,
  HttpApiEndpoint,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity,
  OpenApi
} from "effect/http-api"

// -----------------------------------------------------------------------------------------------------------
// Errors: every error body is `{"detail": "…"}`
// -----------------------------------------------------------------------------------------------------------

/**
 * 401: no bearer token.
 *
 * @since 0.1.0
 */
export class Unauthorized extends Schema.Error<Unauthorized>("@resilience/api-app/Unauthorized")({
  detail: Schema.String
}, { httpApiStatus: 401, description: "No bearer token was given." }) {}

/**
 * 403: a bearer token that does not grant this request (another workspace's token, a wrong admin token).
 *
 * @since 0.1.0
 */
export class Forbidden extends Schema.Error<Forbidden>("@resilience/api-app/Forbidden")({
  detail: Schema.String
}, { httpApiStatus: 403, description: "The bearer token does not grant access to this resource." }) {}

/**
 * 404: no such workspace, or nothing derived yet for this peer.
 *
 * @since 0.1.0
 */
export class NotFound extends Schema.Error<NotFound>("@resilience/api-app/NotFound")({
  detail: Schema.String
}, { httpApiStatus: 404, description: "The workspace (or the peer's representation) does not exist." }) {}

/**
 * 409: a workspace with this name exists already.
 *
 * @since 0.1.0
 */
export class Conflict extends Schema.Error<Conflict>("@resilience/api-app/Conflict")({
  detail: Schema.String
}, { httpApiStatus: 409, description: "A workspace with this name exists already." }) {}

// -----------------------------------------------------------------------------------------------------------
// Security
// -----------------------------------------------------------------------------------------------------------

/**
 * The bearer token of the current request, as given (checked by the handler against the workspace, in the same
 * database checkout as the request's work).
 *
 * @since 0.1.0
 */
export class BearerToken extends Context.Service<BearerToken, Redacted.Redacted<string>>()(
  "@resilience/api-app/BearerToken"
) {}

/**
 * The admin bearer token (`API_ADMIN_TOKEN`): required to create workspaces.
 *
 * @since 0.1.0
 */
export class AdminAuth extends HttpApiMiddleware.Service<AdminAuth>()("@resilience/api-app/AdminAuth", {
  security: { admin: HttpApiSecurity.bearer },
  error: [Unauthorized, Forbidden],
  requiredForClient: true
}) {}

/**
 * A workspace's own bearer token (returned when the workspace was created): required for its routes.
 *
 * @since 0.1.0
 */
export class WorkspaceAuth extends HttpApiMiddleware.Service<WorkspaceAuth, { provides: BearerToken }>()(
  "@resilience/api-app/WorkspaceAuth",
  { security: { workspace: HttpApiSecurity.bearer }, error: Unauthorized, requiredForClient: true }
) {}

// -----------------------------------------------------------------------------------------------------------
// Payloads and responses
// -----------------------------------------------------------------------------------------------------------

/**
 * Largest message content accepted, in characters.
 *
 * @since 0.1.0
 */
export const maxContentLength = 10_000

/**
 * Most messages accepted in one request.
 *
 * @since 0.1.0
 */
export const maxMessagesPerRequest = 100

const described = <S extends Schema.Top>(schema: S, description: string) => schema.annotate({ description })

/**
 * `POST /v1/workspaces` body.
 *
 * @since 0.1.0
 */
export const CreateWorkspace = Schema.Struct({
  name: described(Names.WorkspaceName, "1–64 characters of A–Z, a–z, 0–9, _ and -, starting with a letter or digit")
})

/**
 * A created workspace and its token (shown once).
 *
 * @since 0.1.0
 */
export const CreatedWorkspace = Schema.Struct({ name: Schema.String, token: Schema.String })

/**
 * One message to store.
 *
 * @since 0.1.0
 */
export const NewMessage = Schema.Struct({
  peer: described(Names.PeerName, "who wrote it: 1–128 characters of A–Z, a–z, 0–9, _, -, . and :"),
  content: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(maxContentLength))
})

/**
 * `POST …/messages` body.
 *
 * @since 0.1.0
 */
export const AppendMessages = Schema.Struct({
  messages: Schema.Array(NewMessage).check(Schema.isMinLength(1), Schema.isMaxLength(maxMessagesPerRequest))
})

/**
 * What was stored, and how many work units were enqueued for the deriver.
 *
 * @since 0.1.0
 */
export const Appended = Schema.Struct({ stored: Schema.Int, enqueued: Schema.Int })

/**
 * Queue counts for a workspace.
 *
 * @since 0.1.0
 */
export const QueueStatus = Schema.Struct({
  pending: Schema.Int,
  inProgress: Schema.Int,
  processed: Schema.Int,
  errored: Schema.Int
})

/**
 * What the deriver derived about a peer.
 *
 * @since 0.1.0
 */
export const Representation = Schema.Struct({
  workspace: Schema.String,
  peer: Schema.String,
  messageCount: Schema.Int,
  sessionCount: Schema.Int,
  firstSeen: Schema.String,
  lastSeen: Schema.String,
  topTerms: Schema.Array(Schema.Struct({ term: Schema.String, count: Schema.Int })),
  updatedAt: Schema.String
})

/**
 * `/healthz` and `/readyz` body.
 *
 * @since 0.1.0
 */
export const Status = Schema.Struct({ status: Schema.String })

// -----------------------------------------------------------------------------------------------------------
// Groups
// -----------------------------------------------------------------------------------------------------------

/**
 * Admin: creating workspaces.
 *
 * @since 0.1.0
 */
export class AdminGroup extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.post("createWorkspace", "/v1/workspaces", {
      payload: CreateWorkspace,
      success: CreatedWorkspace.pipe(HttpApiSchema.status(201)),
      error: Conflict
    })
  )
  .middleware(AdminAuth)
  .annotateMerge(OpenApi.annotations({ title: "Admin", description: "Requires the admin bearer token." }))
{}

const WorkspaceParams = { workspace: described(Names.WorkspaceName, "workspace name") }

/**
 * A workspace's routes, under its own token.
 *
 * @since 0.1.0
 */
export class WorkspaceGroup extends HttpApiGroup.make("workspace")
  .add(
    HttpApiEndpoint.post("appendMessages", "/v1/workspaces/:workspace/sessions/:session/messages", {
      params: { ...WorkspaceParams, session: described(Names.SessionName, "session name") },
      payload: AppendMessages,
      success: Appended.pipe(HttpApiSchema.status(201)),
      error: [Forbidden, NotFound]
    }),
    HttpApiEndpoint.get("queueStatus", "/v1/workspaces/:workspace/queue", {
      params: WorkspaceParams,
      success: QueueStatus,
      error: [Forbidden, NotFound]
    }),
    HttpApiEndpoint.get("representation", "/v1/workspaces/:workspace/peers/:peer/representation", {
      params: { ...WorkspaceParams, peer: described(Names.PeerName, "peer name") },
      success: Representation,
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
