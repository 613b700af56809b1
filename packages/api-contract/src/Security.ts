/**
 * The API's two bearer tokens, as `HttpApi` middleware: the admin token and a workspace's own token.
 * Servers provide their checks; clients provide how to attach the token (`HttpApiMiddleware.layerClient`).
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { Redacted } from "effect"
import { HttpApiMiddleware, HttpApiSecurity } from "effect/http-api"
import { Forbidden, Unauthorized } from "./Errors.ts"

/**
 * The bearer token of the current request, as given (checked by the handler against the workspace, in the same
 * database checkout as the request's work).
 *
 * @since 0.1.0
 * @category services
 */
export class BearerToken extends Context.Service<BearerToken, Redacted.Redacted<string>>()(
  "@resilience/api-app/BearerToken"
) {}

/**
 * The admin bearer token (`API_ADMIN_TOKEN`): required to create workspaces.
 *
 * @since 0.1.0
 * @category middleware
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
 * @category middleware
 */
export class WorkspaceAuth extends HttpApiMiddleware.Service<WorkspaceAuth, { provides: BearerToken }>()(
  "@resilience/api-app/WorkspaceAuth",
  { security: { workspace: HttpApiSecurity.bearer }, error: Unauthorized, requiredForClient: true }
) {}
