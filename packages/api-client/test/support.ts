/**
 * The real API, in-process on an ephemeral loopback port, behind a recording HTTP proxy that notes every
 * request that reaches the server (time, method, path, idempotency key, status): the client's retries are
 * counted where they land.
 */
import { Settings as Admission } from "@resilience/admission"
import { Http, Readiness, Settings } from "@resilience/api-app"
import { RetryAfter } from "@resilience/api-errors"
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/domain"
import { Cluster } from "@resilience/local-postgres"
import { EntryPoint, HttpStandIn } from "@resilience/test-db"
import { Context, Effect, Layer, Logger, Redacted } from "effect"
import { HttpServer } from "effect/http"
import { request as forward } from "node:http"

export const adminToken = "client-test-admin-token-0123"

/** The API on `url`'s database; ready (schema migrated) when returned. */
export const startApi = (
  options: { readonly url: string; readonly retryAfterSeconds: number; readonly schema: string }
) =>
  Effect.gen(function*() {
    const settings: Settings.Settings = {
      port: 0,
      host: "127.0.0.1",
      schema: SchemaName.makeUnsafe(options.schema),
      adminToken: Redacted.make(adminToken),
      maxBodyBytes: 64 * 1024,
      retryAfter: RetryAfter.fixed(options.retryAfterSeconds),
      migrate: true,
      // The client's retries are under test, not the admission gate: an open circuit would put the rest of
      // its window into Retry-After, above these tests' retry caps.
      admission: { ...Admission.defaults, enabled: false }
    }
    const context = yield* Layer.build(
      Http.server.pipe(
        Layer.provide(DbSession.layer({
          url: options.url,
          connectTimeout: "2 seconds",
          poolClass: "null",
          poolSize: 10,
          driver: "pg",
          applicationName: "api-client-test"
        })),
        Layer.provide(Settings.AppSettings.layer(settings)),
        Layer.provide(Logger.layer([]))
      )
    )
    yield* Effect.orDie(Context.get(context, Readiness.Readiness).await)
    return HttpServer.formatAddress(Context.get(context, HttpServer.HttpServer).address)
  })

/** One request as it reached the server. */
export interface Arrival {
  readonly atMillis: number
  readonly method: string
  readonly path: string
  readonly idempotencyKey: string | undefined
  readonly status: number
}

/** A forwarding proxy in front of `target` that records every request; closed with the scope. */
export const recordingProxy = (target: string) =>
  Effect.gen(function*() {
    const arrivals: Array<Arrival> = []
    const upstream = new URL(target)
    const { url } = yield* HttpStandIn.serve((incoming, outgoing) => {
      const atMillis = performance.now()
      const key = incoming.headers["idempotency-key"]
      const proxied = forward({
        host: upstream.hostname,
        port: upstream.port,
        method: incoming.method,
        path: incoming.url,
        headers: incoming.headers
      }, (response) => {
        arrivals.push({
          atMillis,
          method: incoming.method ?? "",
          path: incoming.url ?? "",
          idempotencyKey: typeof key === "string" ? key : undefined,
          status: response.statusCode ?? 0
        })
        outgoing.writeHead(response.statusCode ?? 502, response.headers)
        response.pipe(outgoing)
      })
      proxied.on("error", () => outgoing.destroy())
      incoming.pipe(proxied)
    })
    return { url, arrivals }
  })

const apiMain = "apps/api/src/main.ts"

/** The real API entry point as its own process on a free loopback port (stopped with the scope); its base URL. */
export const spawnApi = (
  options: { readonly url: string; readonly schema: string; readonly env?: Record<string, string> }
) =>
  Effect.gen(function*() {
    const port = yield* Cluster.freePort
    yield* EntryPoint.start(apiMain, {
      DATABASE_URL: options.url,
      DB_SCHEMA: options.schema,
      API_PORT: String(port),
      API_HOST: "127.0.0.1",
      API_ADMIN_TOKEN: adminToken,
      API_LOG_LEVEL: "Error",
      ...options.env
    }, { output: "inherit", stopWith: "SIGTERM" })
    return `http://127.0.0.1:${port}`
  })
