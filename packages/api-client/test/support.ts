/**
 * The real API entry point, on an ephemeral loopback port, behind a recording HTTP proxy that notes every
 * request that reaches the server (time, method, path, idempotency key, status): the client's retries are
 * counted where they land.
 */
import { EntryPoint, HttpStandIn } from "@resilience/test-db"
import { Effect } from "effect"
import { request as forward } from "node:http"
import { ApiClient } from "../src/index.ts"

export const adminToken = "client-test-admin-token-0123"

/** A readiness wait is one long poll, not a fleet's retries: it gets a budget that does not run out. */
const waiting = { maxTokens: 1_000_000, ratio: 1 }

/**
 * The real API entry point on `url`'s database with `Retry-After: retryAfterSeconds`, ready (schema migrated)
 * when returned; its base URL. The admission gate is off: the client's retries are under test, and an open
 * circuit would put the rest of its window into Retry-After, above these tests' retry caps.
 */
export const startApi = (
  options: { readonly url: string; readonly retryAfterSeconds: number; readonly schema: string }
) =>
  Effect.gen(function*() {
    const baseUrl = yield* spawnApi({
      url: options.url,
      schema: options.schema,
      env: { API_RETRY_AFTER_SECONDS: String(options.retryAfterSeconds), API_ADMISSION_ENABLED: "false" }
    })
    const client = yield* ApiClient.make({ baseUrl, maxAttempts: 100, maxDelay: "1 second", budget: waiting }).pipe(
      Effect.orDie
    )
    yield* Effect.orDie(client.readyz)
    return baseUrl
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

/** The real API entry point as its own process on a free loopback port (stopped with the scope); its base URL. */
export const spawnApi = (
  options: { readonly url: string; readonly schema: string; readonly env?: Record<string, string> }
) => EntryPoint.api({ ...options, env: { ...EntryPoint.compileCache, ...options.env }, adminToken, logLevel: "Error" })
