/**
 * The API's client: derived from the contract (`@resilience/api-contract`) with Effect's `HttpApiClient`, over
 * the retrying {@link Transport}. One method per endpoint; every failure is one of three typed errors
 * ({@link ClientErrors.ApiUnavailable}, {@link ClientErrors.ApiRejected}, {@link ClientErrors.ApiUnauthorized}).
 * Each call is a span (`ApiClient.<endpoint>`, kind client, its HTTP attempts as children carrying
 * `traceparent`) and counted in {@link ClientMetrics}.
 *
 * @since 0.1.0
 */
import { Api, Errors, Security } from "@resilience/api-contract"
import { ApiMiddleware, Validation } from "@resilience/api-errors"
import type { Model } from "@resilience/model"
import { InvalidParameter } from "@resilience/parameters"
import { Effect, Metric, Option, Predicate, Redacted, Schema } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient, HttpApiMiddleware } from "effect/http-api"
import { ApiRejected, ApiUnauthorized, ApiUnavailable, type ClientError } from "./ClientErrors.ts"
import * as ClientMetrics from "./internal/ClientMetrics.ts"
import { type Call, CurrentCall } from "./internal/CurrentCall.ts"
import * as Transport from "./internal/Transport.ts"
import * as RetryBudget from "./RetryBudget.ts"
import * as RetryPolicy from "./RetryPolicy.ts"

/**
 * Options of a client: where the API is, the retries ({@link RetryPolicy.Options}) and the retry budget (its
 * options, or a budget shared with other clients).
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends RetryPolicy.Options {
  /** The API's base URL, `http://` or `https://`. */
  readonly baseUrl: string | URL
  /** The retry budget: options of a new one (default 10 tokens, 10 % of requests), or one to share. */
  readonly budget?: RetryBudget.Options | RetryBudget.RetryBudget | undefined
}

/**
 * A token, as given or redacted.
 *
 * @since 0.1.0
 * @category models
 */
export type Token = string | Redacted.Redacted<string>

/**
 * A write's options: a caller-chosen idempotency key carries one logical write across several calls (e.g. a
 * resend after `ApiUnavailable`); without one, each call makes its own, reused by all its retries.
 *
 * @since 0.1.0
 * @category models
 */
export interface WriteOptions {
  readonly idempotencyKey?: string | undefined
}

/**
 * The client.
 *
 * @since 0.1.0
 * @category models
 */
export interface ApiClient {
  /** `POST /v1/workspaces` with the admin token. */
  readonly createWorkspace: (
    options: { readonly adminToken: Token; readonly name: string } & WriteOptions
  ) => Effect.Effect<Model.CreatedWorkspace, ClientError>
  /** `POST /v1/workspaces/{workspace}/sessions/{session}/messages` with the workspace's token. */
  readonly appendMessages: (
    options: {
      readonly token: Token
      readonly workspace: string
      readonly session: string
      readonly messages: ReadonlyArray<Model.NewMessage>
    } & WriteOptions
  ) => Effect.Effect<Model.Appended, ClientError>
  /** `GET /v1/workspaces/{workspace}/queue`. */
  readonly queueStatus: (
    options: { readonly token: Token; readonly workspace: string }
  ) => Effect.Effect<Model.QueueStatus, ClientError>
  /** `GET …/peers/{peer}/representation`; none while nothing is derived yet (404). */
  readonly representation: (
    options: { readonly token: Token; readonly workspace: string; readonly peer: string }
  ) => Effect.Effect<Option.Option<Model.Representation>, ClientError>
  /** `GET /readyz`: succeeds once the API is ready (its 503s are retried like any other). */
  readonly readyz: Effect.Effect<void, ClientError>
  /** The retry budget (shared by every call of this client). */
  readonly budget: RetryBudget.RetryBudget
}

const baseUrlOf = (value: string | URL): Effect.Effect<URL, InvalidParameter.InvalidParameter> => {
  const url = URL.canParse(String(value)) ? new URL(String(value)) : undefined
  return url !== undefined && (url.protocol === "http:" || url.protocol === "https:")
    ? Effect.succeed(url)
    : Effect.fail(
      new InvalidParameter.InvalidParameter({
        parameter: "baseUrl",
        value: String(value),
        allowed: "an http:// or https:// URL"
      })
    )
}

const isBudget = (u: unknown): u is RetryBudget.RetryBudget => Predicate.hasProperty(u, "withdraw")

const detailOf = (u: unknown): string =>
  Predicate.hasProperty(u, "detail") && typeof u.detail === "string"
    ? u.detail
    : Predicate.hasProperty(u, "message") && typeof u.message === "string"
    ? u.message
    : String(u)

const statusOf = (u: unknown): number | undefined => {
  if (!Predicate.hasProperty(u, "reason") || !Predicate.hasProperty(u.reason, "response")) return undefined
  const response = u.reason.response
  return Predicate.hasProperty(response, "status") && typeof response.status === "number" ? response.status : undefined
}

/**
 * The typed error of a failed call.
 *
 * @deprecated since 0.3.0: internal, what `make`'s calls fail with; no longer exported from the next minor release.
 * @since 0.1.0
 * @category decisions
 */
export const toClientError = (endpoint: string, error: unknown): ClientError => {
  if (error instanceof ApiUnavailable) return error
  if (error instanceof Errors.Unauthorized) return new ApiUnauthorized({ endpoint, status: 401, detail: error.detail })
  if (error instanceof Errors.Forbidden) return new ApiUnauthorized({ endpoint, status: 403, detail: error.detail })
  if (error instanceof ApiMiddleware.DatabaseTemporarilyUnavailable) {
    return new ApiUnavailable({
      endpoint,
      attempts: 1,
      gaveUp: "AttemptsExhausted",
      status: 503,
      retryAfterMillis: undefined,
      detail: error.detail
    })
  }
  if (Schema.isSchemaError(error)) {
    // the request did not match the contract: checked before sending, like the server would (400)
    return new ApiRejected({ endpoint, status: 400, detail: `Invalid request: ${error.message}` })
  }
  const status = error instanceof Errors.NotFound
    ? 404
    : error instanceof Errors.Conflict
    ? 409
    : error instanceof Validation.InvalidRequest
    ? 400
    : statusOf(error) ?? 500
  return new ApiRejected({ endpoint, status, detail: detailOf(error) })
}

const outcomeOf = (error: ClientError) =>
  error._tag === "ApiUnavailable" ? "unavailable" : error._tag === "ApiRejected" ? "rejected" : "unauthorized"

const bearer = (request: HttpClientRequest.HttpClientRequest) =>
  Effect.map(
    Effect.service(CurrentCall),
    (call) => call.token === undefined ? request : HttpClientRequest.bearerToken(request, Redacted.value(call.token))
  )

/**
 * Builds a client (needs an `HttpClient`, e.g. `FetchHttpClient.layer`). Invalid options fail with an
 * `InvalidParameter` naming the option and what is allowed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options
): Effect.Effect<ApiClient, InvalidParameter.InvalidParameter, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const baseUrl = yield* baseUrlOf(options.baseUrl)
    const settings = yield* RetryPolicy.settings(options)
    const budget = isBudget(options.budget) ? options.budget : yield* RetryBudget.make(options.budget)
    const transport = Transport.make(yield* HttpClient.HttpClient, settings, budget)
    const client = yield* HttpApiClient.makeWith(Api.Api, { httpClient: transport, baseUrl }).pipe(
      Effect.provide(
        HttpApiMiddleware.layerClient(Security.AdminAuth, ({ next, request }) => Effect.flatMap(bearer(request), next))
      ),
      Effect.provide(HttpApiMiddleware.layerClient(Security.WorkspaceAuth, ({ next, request }) =>
        Effect.flatMap(bearer(request), next)))
    )

    const call = <A, E>(
      effect: Effect.Effect<A, E>,
      current: Omit<Call, "token" | "idempotencyKey"> & { readonly token?: Token | undefined } & WriteOptions
    ): Effect.Effect<A, ClientError> => {
      const count = (outcome: string) =>
        Metric.update(Metric.withAttributes(ClientMetrics.requestsTotal, { endpoint: current.endpoint, outcome }), 1)
      return effect.pipe(
        Effect.mapError((error) =>
          toClientError(current.endpoint, error)
        ),
        Effect.tapError((error) =>
          count(outcomeOf(error))
        ),
        Effect.tap(() => count("success")),
        Effect.provideService(CurrentCall, {
          endpoint: current.endpoint,
          token: current.token === undefined ? undefined : Redacted.isRedacted(current.token)
            ? current.token
            : Redacted.make(current.token),
          keyHonoured: current.keyHonoured,
          idempotencyKey: current.idempotencyKey
        }),
        Effect.withSpan(`ApiClient.${current.endpoint}`, { kind: "client" })
      )
    }

    return {
      budget,
      createWorkspace: ({ adminToken, idempotencyKey, name }) =>
        call(client.admin.createWorkspace({ payload: { name } }), {
          endpoint: "createWorkspace",
          token: adminToken,
          keyHonoured: false,
          idempotencyKey
        }),
      appendMessages: ({ idempotencyKey, messages, session, token, workspace }) =>
        // The key travels as a header set for every attempt of the call (see CurrentCall), not per request here.
        call(client.workspace.appendMessages({ params: { workspace, session }, headers: {}, payload: { messages } }), {
          endpoint: "appendMessages",
          token,
          keyHonoured: true,
          idempotencyKey
        }),
      queueStatus: ({ token, workspace }) =>
        call(client.workspace.queueStatus({ params: { workspace } }), {
          endpoint: "queueStatus",
          token,
          keyHonoured: false
        }),
      representation: ({ peer, token, workspace }) =>
        call(
          client.workspace.representation({ params: { workspace, peer } }).pipe(
            Effect.map(Option.some),
            Effect.catchIf((error) => error instanceof Errors.NotFound, () => Effect.succeedNone)
          ),
          { endpoint: "representation", token, keyHonoured: false }
        ),
      readyz: call(Effect.asVoid(client.readyz()), { endpoint: "readyz", keyHonoured: false })
    } satisfies ApiClient
  })
