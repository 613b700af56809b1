/**
 * `npm run demo`: the resilience, visible. A throw-away system (embedded PostgreSQL with few connection
 * slots, the API, one deriver) derives a conversation; then the database is saturated for a few seconds:
 * the API answers fast 503s with Retry-After, the deriver's poll interval climbs; then the slots are freed,
 * the client retries on its side as told, and everything is processed with no work lost.
 */
import { ApiClient, type ClientErrors } from "@resilience/api-client"
import { Saturation, type ServerStartFailed } from "@resilience/local-postgres"
import type { Model } from "@resilience/model"
import { Duration, Effect, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { randomUUID } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type * as Child from "./Child.ts"
import * as DemoWorkspace from "./DemoWorkspace.ts"
import * as PrometheusText from "./PrometheusText.ts"
import * as Stack from "./Stack.ts"

const conversation = [
  { peer: "alice", content: "Our deriver fleet restarted at once after the database came back." },
  { peer: "bob", content: "Then every deriver polled in the same second and the pooler filled up." },
  { peer: "alice", content: "The connection retry kept the pooler full for hours." },
  { peer: "bob", content: "Jitter spreads the polls; failing fast lets the pooler drain." },
  { peer: "alice", content: "And the API answers 503 with Retry-After so clients back off." }
]

const during = [
  { peer: "alice", content: "Is the database saturated right now?" },
  { peer: "bob", content: "Yes, every connection slot is held." },
  { peer: "alice", content: "Then this message waits on the client side." }
]

const say = (line: string) => Effect.sync(() => console.log(line))

/** Polls the API's queue status (client side, every half second) until nothing is pending or in progress. */
const awaitDrained = (client: ApiClient.ApiClient, workspace: DemoWorkspace.Workspace) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < 120; waited++) {
      const status = yield* client.queueStatus({ token: workspace.token, workspace: workspace.name }).pipe(
        Effect.catchTag("ApiUnavailable", () => Effect.succeed(undefined))
      )
      if (status !== undefined && status.pending === 0 && status.inProgress === 0) return status
      yield* Effect.sleep(Duration.millis(500))
    }
    return yield* Effect.die(new Error("the queue did not drain within 60 s"))
  })

const post = (
  client: ApiClient.ApiClient,
  workspace: DemoWorkspace.Workspace,
  messages: ReadonlyArray<Model.NewMessage>,
  idempotencyKey?: string
) =>
  client.appendMessages({
    token: workspace.token,
    workspace: workspace.name,
    session: "incident",
    messages,
    idempotencyKey
  })

const representation = (client: ApiClient.ApiClient, workspace: DemoWorkspace.Workspace, peer: string) =>
  Effect.flatMap(
    client.representation({ token: workspace.token, workspace: workspace.name, peer }),
    Option.match({
      onNone: () => Effect.die(new Error(`nothing derived for ${peer}`)),
      onSome: Effect.succeed
    })
  )

/** The scripted demo; `saturationSeconds` long saturation window. */
export const run = (options: {
  readonly saturationSeconds: number
}): Effect.Effect<void, Child.ChildExited | ServerStartFailed | ClientErrors.ClientError> =>
  Effect.gen(function*() {
    const directory = mkdtempSync(join(tmpdir(), "resilience-demo-"))
    const ports = {
      db: 54400 + (process.pid % 500),
      api: 18000 + (process.pid % 500),
      metrics: 19000 + (process.pid % 500)
    }
    const adminToken = "demo-admin-token"
    yield* say("1. Starting a throw-away system: embedded PostgreSQL (max_connections = 12), the API, one deriver")
    const stack = yield* Stack.start({
      databaseUrl: Option.none(),
      embedded: { directory: undefined, port: ports.db, maxConnections: 12 },
      apiPort: ports.api,
      deriverMetricsPort: ports.metrics,
      adminToken,
      env: {
        DB_POOL_CLASS: "null",
        DB_CONNECT_TIMEOUT_SECONDS: "1",
        DERIVER_WORKERS: "2",
        DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "8",
        DERIVER_POLLING_STARTUP_JITTER_SECONDS: "1",
        API_RETRY_AFTER_SECONDS: "1"
      },
      onLine: () => undefined
    })
    // the client of every SDK user: retries 503s after Retry-After + jitter, within its retry budget
    const client = yield* ApiClient.make({ baseUrl: stack.apiUrl }).pipe(Effect.orDie)
    // a probe that reports each answer as it is, to show the 503s (one attempt, no retry)
    const probe = yield* ApiClient.make({ baseUrl: stack.apiUrl, maxAttempts: 1 }).pipe(Effect.orDie)
    const workspace = yield* DemoWorkspace.ensure({ client, adminToken, directory, name: "demo" })
    yield* say(`   API ${stack.apiUrl}, workspace "${workspace.name}"`)

    yield* say(`2. Posting a conversation of ${conversation.length} messages and waiting for the deriver`)
    yield* post(client, workspace, conversation)
    yield* awaitDrained(client, workspace)
    for (const peer of ["alice", "bob"]) {
      yield* say(`   ${peer}: ${JSON.stringify(yield* representation(client, workspace, peer))}`)
    }

    yield* say(`3. Saturating the database for ${options.saturationSeconds} s: every connection slot held`)
    const postedDuring = yield* Effect.scoped(Effect.gen(function*() {
      const { held, refusal } = yield* Saturation.hold(stack.databaseUrl, { limit: 64 }).pipe(Effect.orDie)
      yield* say(`   holding ${held} connections; the next client is refused with ${refusal.code}`)
      const refused: Array<{ readonly message: Model.NewMessage; readonly key: string }> = []
      for (let second = 0; second < options.saturationSeconds; second++) {
        const message = during[second % during.length]!
        const key = randomUUID()
        const started = performance.now()
        const answer = yield* post(probe, workspace, [message], key).pipe(
          Effect.as("201"),
          Effect.catchTag("ApiUnavailable", (error) => {
            refused.push({ message, key })
            return Effect.succeed(
              `${error.status ?? "no answer"} (Retry-After ${
                error.retryAfterMillis === undefined ? "-" : `${error.retryAfterMillis / 1000} s`
              })`
            )
          })
        )
        const millis = performance.now() - started
        const metrics = yield* PrometheusText.scrape(stack.deriverMetricsUrl)
        const interval = PrometheusText.sample(metrics, "deriver_poll_interval_seconds")
        const errors = PrometheusText.sample(metrics, "deriver_polls_total", `result="error"`)
        yield* say(
          `   t=${second}s  POST messages → ${answer} in ${millis.toFixed(0)} ms`
            + `  |  deriver poll interval ${interval} s, failed polls ${errors}`
        )
        yield* Effect.sleep(Duration.seconds(1))
      }
      return refused
    }))

    yield* say(
      "4. Saturation cleared (connections released); the client resends what was refused, same Idempotency-Key"
    )
    for (const { key, message } of postedDuring) {
      yield* post(client, workspace, [message], key)
      yield* say(
        `   refused during saturation; accepted on resend (key ${key.slice(0, 8)}…, Retry-After + jitter between tries)`
      )
    }
    const status = yield* awaitDrained(client, workspace)
    yield* say(`   queue: ${JSON.stringify(status)}`)
    const woken = PrometheusText.sample(
      yield* PrometheusText.scrape(stack.deriverMetricsUrl),
      "deriver_polls_woken_total"
    )
    yield* say(
      `   the API woke the deriver after each accepted write (${woken} woken polls): no wait for its backed-off schedule`
    )
    const derived = yield* Effect.forEach(
      ["alice", "bob"],
      (peer) => Effect.map(representation(client, workspace, peer), (derived) => derived.messageCount)
    )
    const counted = derived.reduce((sum, count) => sum + count, 0)
    const posted = conversation.length + postedDuring.length
    const intact = counted === posted && status.errored === 0
    yield* say(
      intact
        ? `5. Recovered by itself: all ${posted} messages derived, no item errored, no restart, no work lost.`
        : `5. UNEXPECTED: ${counted} of ${posted} messages derived, ${status.errored} items errored`
    )
    if (!intact) return yield* Effect.die(new Error("the demo lost or failed work"))
  }).pipe(Effect.scoped, Effect.provide(FetchHttpClient.layer))
