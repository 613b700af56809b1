/**
 * `npm run demo`: the resilience, visible. A throw-away system (embedded PostgreSQL with few connection
 * slots, the API, one deriver) derives a conversation; then the database is saturated for a few seconds:
 * the API answers fast 503s with Retry-After, the deriver's poll interval climbs; then the slots are freed,
 * the client retries on its side as told, and everything is processed with no work lost.
 */
import { Saturation } from "@resilience/local-postgres"
import { Duration, Effect, Option, Schema } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ApiClient from "./ApiClient.ts"
import * as DemoWorkspace from "./DemoWorkspace.ts"
import * as PrometheusText from "./PrometheusText.ts"
import * as Stack from "./Stack.ts"

/** Queue counts as the API reports them. */
const QueueStatus = Schema.Struct({
  pending: Schema.Number,
  inProgress: Schema.Number,
  processed: Schema.Number,
  errored: Schema.Number
})
const decodeQueueStatus = Schema.decodeUnknownSync(QueueStatus)
const decodeMessageCount = Schema.decodeUnknownSync(Schema.Struct({ messageCount: Schema.Number }))

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
const awaitDrained = (apiUrl: string, workspace: DemoWorkspace.Workspace) =>
  Effect.gen(function*() {
    for (let waited = 0; waited < 120; waited++) {
      const response = yield* ApiClient.send(apiUrl, "GET", `/v1/workspaces/${workspace.name}/queue`, {
        token: workspace.token
      })
      if (response.status === 200) {
        const status = decodeQueueStatus(response.body)
        if (status.pending === 0 && status.inProgress === 0) return status
      }
      yield* Effect.sleep(Duration.millis(500))
    }
    return yield* Effect.die(new Error("the queue did not drain within 60 s"))
  })

const postMessages = (apiUrl: string, workspace: DemoWorkspace.Workspace, messages: ReadonlyArray<unknown>) =>
  ApiClient.send(apiUrl, "POST", `/v1/workspaces/${workspace.name}/sessions/incident/messages`, {
    token: workspace.token,
    body: { messages }
  })

/** Posts once per message; a 503 is retried by this client after its Retry-After, as an SDK would. */
const postWithClientRetry = (apiUrl: string, workspace: DemoWorkspace.Workspace, message: unknown) =>
  Effect.gen(function*() {
    for (let attempt = 1;; attempt++) {
      const response = yield* postMessages(apiUrl, workspace, [message])
      if (response.status === 201) return attempt
      if (response.status !== 503) {
        return yield* Effect.die(new Error(`unexpected ${response.status}: ${JSON.stringify(response.body)}`))
      }
      yield* Effect.sleep(Duration.seconds(response.retryAfter ?? 1))
    }
  })

/** The scripted demo; `saturationSeconds` long saturation window. */
export const run = (options: { readonly saturationSeconds: number }) =>
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
    const workspace = yield* DemoWorkspace.ensure({ apiUrl: stack.apiUrl, adminToken, directory, name: "demo" })
    yield* say(`   API ${stack.apiUrl}, workspace "${workspace.name}"`)

    yield* say(`2. Posting a conversation of ${conversation.length} messages and waiting for the deriver`)
    yield* ApiClient.expect(
      [201],
      stack.apiUrl,
      "POST",
      `/v1/workspaces/${workspace.name}/sessions/incident/messages`,
      {
        token: workspace.token,
        body: { messages: conversation }
      }
    )
    yield* awaitDrained(stack.apiUrl, workspace)
    for (const peer of ["alice", "bob"]) {
      const representation = yield* ApiClient.expect(
        [200],
        stack.apiUrl,
        "GET",
        `/v1/workspaces/${workspace.name}/peers/${peer}/representation`,
        { token: workspace.token }
      )
      yield* say(`   ${peer}: ${JSON.stringify(representation.body)}`)
    }

    yield* say(`3. Saturating the database for ${options.saturationSeconds} s: every connection slot held`)
    const postedDuring = yield* Effect.scoped(Effect.gen(function*() {
      const { held, refusal } = yield* Saturation.hold(stack.databaseUrl, { limit: 64 }).pipe(Effect.orDie)
      yield* say(`   holding ${held} connections; the next client is refused with ${refusal.code}`)
      const refused: Array<unknown> = []
      for (let second = 0; second < options.saturationSeconds; second++) {
        const message = during[second % during.length]
        const post = yield* postMessages(stack.apiUrl, workspace, [message])
        if (post.status === 503) refused.push(message)
        const metrics = yield* PrometheusText.scrape(stack.deriverMetricsUrl)
        const interval = PrometheusText.sample(metrics, "deriver_poll_interval_seconds")
        const errors = PrometheusText.sample(metrics, "deriver_polls_total", `result="error"`)
        yield* say(
          `   t=${second}s  POST messages → ${post.status} in ${post.millis.toFixed(0)} ms, Retry-After: ${
            post.retryAfter ?? "-"
          }`
            + `  |  deriver poll interval ${interval} s, failed polls ${errors}`
        )
        yield* Effect.sleep(Duration.seconds(1))
      }
      return refused
    }))

    yield* say("4. Saturation cleared (connections released); the client retries what was refused, after Retry-After")
    for (const message of postedDuring) {
      const attempts = yield* postWithClientRetry(stack.apiUrl, workspace, message)
      yield* say(`   refused during saturation; accepted on client-side retry #${attempts}, sent after Retry-After`)
    }
    const status = yield* awaitDrained(stack.apiUrl, workspace)
    yield* say(`   queue: ${JSON.stringify(status)}`)
    const derived = yield* Effect.forEach(
      ["alice", "bob"],
      (peer) =>
        ApiClient.expect([200], stack.apiUrl, "GET", `/v1/workspaces/${workspace.name}/peers/${peer}/representation`, {
          token: workspace.token
        }).pipe(Effect.map((response) => decodeMessageCount(response.body).messageCount))
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
  }).pipe(Effect.scoped)
