/**
 * Starts the real API server in-process on an ephemeral loopback port, against a database URL, with its log
 * captured; tests talk to it with `fetch`.
 */
import { Settings as Admission } from "@resilience/admission"
import { Http, Settings } from "@resilience/api-app"
import { ApiClient } from "@resilience/api-client"
import { RetryAfter } from "@resilience/api-errors"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/domain"
import { SchemaMigration } from "@resilience/schema"
import type { WakeSender } from "@resilience/wake"
import { Cause, Context, Duration, Effect, Layer, Logger, Option, Redacted } from "effect"
import { FetchHttpClient, HttpServer } from "effect/http"

export const adminToken = "test-admin-token-0123456789"

export interface LogLine {
  readonly level: string
  readonly message: string
  readonly cause: string
}

export interface TestServer {
  readonly baseUrl: string
  readonly logs: Array<LogLine>
  readonly readiness: SchemaMigration.Readiness
}

export interface Options {
  readonly url: string
  readonly schema?: string | undefined
  readonly migrate?: boolean | undefined
  readonly connectTimeout?: Duration.Input | undefined
  readonly statementTimeout?: Duration.Input | undefined
  readonly idempotencyRetentionSeconds?: number | undefined
  readonly maxBodyBytes?: number | undefined
  /** Wait until the schema is ready before returning (default: when migrating). */
  readonly awaitReady?: boolean | undefined
  readonly admission?: Admission.Options | undefined
  readonly readinessCacheMillis?: number | undefined
  /**
   * The session's pool (default `null`: a fresh connection per checkout, as in production behind a pooler);
   * `queue` keeps up to `poolSize` connections open, where the pool class is not what a test is about.
   */
  readonly pool?: { readonly poolClass: "null" | "queue"; readonly poolSize: number } | undefined
  /** Wake the deriver after each write that enqueued work (default: off). */
  readonly wake?: WakeSender.Settings | undefined
}

export const start = (options: Options) =>
  Effect.gen(function*() {
    const logs: Array<LogLine> = []
    const capture = Logger.make((entry) => {
      logs.push({
        level: entry.logLevel,
        message: Array.isArray(entry.message) ? entry.message.map(String).join(" ") : String(entry.message),
        cause: entry.cause.reasons.length === 0 ? "" : Cause.pretty(entry.cause)
      })
    })
    const settings: Settings.Settings = {
      port: 0,
      host: "127.0.0.1",
      schema: SchemaName.makeUnsafe(options.schema ?? "api_test"),
      adminToken: Redacted.make(adminToken),
      maxBodyBytes: options.maxBodyBytes ?? 64 * 1024,
      retryAfter: RetryAfter.fixed(1),
      migrate: options.migrate ?? true,
      idempotencyRetentionSeconds: options.idempotencyRetentionSeconds,
      admission: yield* Effect.orDie(Admission.make(options.admission)),
      readinessCacheMillis: options.readinessCacheMillis ?? 1_000,
      wake: Option.fromUndefinedOr(options.wake)
    }
    const context = yield* Layer.build(
      Http.server.pipe(
        Layer.provide(DbSession.layer({
          url: options.url,
          connectTimeout: options.connectTimeout ?? Duration.seconds(2),
          statementTimeout: options.statementTimeout,
          poolClass: options.pool?.poolClass ?? "null",
          poolSize: options.pool?.poolSize ?? 10,
          driver: "pg",
          applicationName: "api-test"
        })),
        Layer.provide(Settings.AppSettings.layer(settings)),
        Layer.provide(Logger.layer([capture]))
      )
    )
    const server = Context.get(context, HttpServer.HttpServer)
    const readiness = Context.get(context, SchemaMigration.SchemaMigration)
    if (options.awaitReady ?? settings.migrate) yield* Effect.orDie(readiness.await)
    return { baseUrl: HttpServer.formatAddress(server.address), logs, readiness } satisfies TestServer
  })

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: unknown
  readonly millis: number
}

/** One request with `fetch`; timed. */
export const request = (
  server: { readonly baseUrl: string },
  method: string,
  path: string,
  options: {
    readonly token?: string | undefined
    readonly body?: unknown
    readonly rawBody?: string | undefined
    readonly headers?: Readonly<Record<string, string>> | undefined
  } = {}
): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const headers: Record<string, string> = { ...options.headers }
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    let body: string | undefined
    if (options.rawBody !== undefined) body = options.rawBody
    else if (options.body !== undefined) body = JSON.stringify(options.body)
    if (body !== undefined) headers["content-type"] = "application/json"
    const startedAt = performance.now()
    const response = await fetch(`${server.baseUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body })
    })
    const text = await response.text()
    const millis = performance.now() - startedAt
    const json: unknown = await Promise.resolve(text).then(JSON.parse).catch(() => undefined)
    return { status: response.status, headers: response.headers, text, json, millis }
  })

/**
 * `POST …/workspaces/acme/sessions/s1/messages`: one message from `alice` per content, with an `Idempotency-Key`
 * when `key` is given.
 */
export const postMessages = (
  server: { readonly baseUrl: string },
  token: string,
  contents: ReadonlyArray<string>,
  key?: string
): Effect.Effect<Reply> =>
  request(server, "POST", "/v1/workspaces/acme/sessions/s1/messages", {
    token,
    body: { messages: contents.map((content) => ({ peer: "alice", content })) },
    headers: key === undefined ? {} : { "idempotency-key": key }
  })

/** Creates a workspace with the admin token through the API client; returns its token. */
export const createWorkspace = (server: { readonly baseUrl: string }, name: string) =>
  Effect.gen(function*() {
    const client = yield* ApiClient.make({ baseUrl: server.baseUrl })
    const created = yield* client.createWorkspace({ adminToken, name })
    return created.token
  }).pipe(Effect.orDie, Effect.provide(FetchHttpClient.layer))
