/**
 * The consistency checker around the API's tests: posts recorded in a history (201 acknowledged, 4xx refused,
 * anything else unknown), a deriver in the test process, and the verdict printed as a table.
 */
import { ApiClient } from "@resilience/api-client"
import { Checker, History } from "@resilience/checker"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig } from "@resilience/deriver"
import { Domain, SchemaName } from "@resilience/domain"
import { Effect, Layer } from "effect"
import { request } from "./TestServer.ts"

/** A database session for the deriver and the checker (a small in-process pool). */
export const session = (url: string) =>
  DbSession.layer({
    url,
    connectTimeout: "2 seconds",
    poolClass: "queue",
    poolSize: 4,
    driver: "pg",
    applicationName: "deriver-test"
  })

/** `POST …/sessions/{session}/messages` with one message, recorded in `history`. */
export const post = (
  api: { readonly baseUrl: string },
  history: History.History,
  token: string,
  write: History.Request
) =>
  History.record(
    history,
    write,
    request(api, "POST", `/v1/workspaces/${write.workspace}/sessions/${write.session}/messages`, {
      token,
      body: { messages: [{ peer: write.peer, content: write.content }] }
    }),
    (exit) => {
      if (exit._tag === "Failure") return "unknown"
      const status = exit.value.status
      return status === 201 ? "acknowledged" : status >= 400 && status < 500 ? "refused" : "unknown"
    }
  )

/**
 * The API client for recorded writes: a 503 is resent with the same Idempotency-Key, up to 30 attempts, waits of
 * at most 5 s (above the test server's Retry-After), a budget that does not run dry.
 */
export const retryingClient = (api: { readonly baseUrl: string }) =>
  ApiClient.make({
    baseUrl: api.baseUrl,
    maxAttempts: 30,
    maxDelay: "5 seconds",
    budget: { maxTokens: 1_000, ratio: 1 }
  }).pipe(Effect.orDie)

/** A deriver for `schema` in this process, fast polls, until the scope closes. */
export const deriver = (schema: string) =>
  Effect.gen(function*() {
    const tenant = SchemaName.makeUnsafe(schema)
    const config = yield* Effect.orDie(DeriverConfig.make({
      workers: 4,
      pollingSleepIntervalSeconds: 0.05,
      pollingSleepMaxIntervalSeconds: 0.2,
      pollingStartupJitterSeconds: 0
    }))
    yield* Deriver.start({ schema: tenant, handlers: Domain.handlers(tenant), config })
  })

/** Waits for the history's queue items, reconciles, prints the table under `label` and returns the verdict. */
export const verdict = (schema: string, history: History.History, label: string) =>
  Effect.gen(function*() {
    const tenant = SchemaName.makeUnsafe(schema)
    yield* Checker.settle(tenant, history)
    const result = yield* Checker.reconcile(tenant, history)
    console.log(`[checker] ${label}\n${Checker.table(result)}`)
    return result
  })

/** {@link verdict} with a deriver running for it, on a session of its own to `url`. */
export const deriveAndCheck = (url: string, schema: string, history: History.History, label: string) =>
  Effect.scoped(Effect.andThen(deriver(schema), verdict(schema, history, label))).pipe(
    Effect.provide(Layer.orDie(session(url))),
    Effect.orDie
  )
