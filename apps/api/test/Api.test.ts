import { assert, describe, it } from "@effect/vitest"
import { Api, Errors, Security } from "@resilience/api-contract"
import { DbSession } from "@resilience/db-session"
import { Deriver, DeriverConfig } from "@resilience/deriver"
import { Domain, Model, SchemaName } from "@resilience/domain"
import { CountingProxy, TestDatabase } from "@resilience/test-db"
import { Effect, Layer, Schedule } from "effect"
import { FetchHttpClient, HttpClientRequest } from "effect/http"
import { HttpApiClient, HttpApiMiddleware } from "effect/http-api"
import { adminToken, createWorkspace, request, start } from "./TestServer.ts"

/** A workspace's `GET …/queue` body: the counts in `counts`, every other 0. */
const queueStatus = (
  counts: { readonly pending?: number; readonly waiting?: number; readonly processed?: number } = {}
) => ({ pending: 0, inProgress: 0, waiting: 0, dead: 0, processed: 0, errored: 0, ...counts })

describe("apps/api over real HTTP, healthy database", () => {
  it.layer(TestDatabase.layer, { timeout: 120_000, excludeTestServices: true })((it) => {
    /** A server on the suite's database (its `public` schema unless `schema` says otherwise). */
    const serverOn = (options: { readonly schema?: string } = {}) =>
      Effect.flatMap(Effect.service(TestDatabase), (db) => start({ url: db.url, ...options }))
    const server = serverOn()
    /** A server and the token of a new workspace on it. */
    const serverWithWorkspace = (name: string, options: { readonly schema?: string } = {}) =>
      Effect.flatMap(serverOn(options), (api) => Effect.map(createWorkspace(api, name), (token) => ({ api, token })))

    it.effect("health, readiness, metrics, docs and the OpenAPI document", () =>
      Effect.gen(function*() {
        const api = yield* server
        const healthz = yield* request(api, "GET", "/healthz")
        assert.strictEqual(healthz.status, 200)
        assert.deepStrictEqual(healthz.json, { status: "ok" })
        const readyz = yield* request(api, "GET", "/readyz")
        assert.strictEqual(readyz.status, 200)
        assert.deepStrictEqual(readyz.json, { status: "ready" })
        const metrics = yield* request(api, "GET", "/metrics")
        assert.strictEqual(metrics.status, 200)
        assert.include(metrics.headers.get("content-type") ?? "", "text/plain")
        assert.include(metrics.text, "db_acquisitions_total")
        assert.strictEqual((yield* request(api, "GET", "/nowhere")).status, 404)
        const docs = yield* request(api, "GET", "/docs")
        assert.strictEqual(docs.status, 200)
        assert.include(docs.headers.get("content-type") ?? "", "text/html")
        const openapi = yield* request(api, "GET", "/openapi.json")
        const spec = openapi.json as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }
        assert.hasAllKeys(spec.paths, [
          "/v1/workspaces",
          "/v1/workspaces/{workspace}/sessions/{session}/messages",
          "/v1/workspaces/{workspace}/queue",
          "/v1/workspaces/{workspace}/peers/{peer}/representation",
          "/healthz",
          "/readyz",
          "/metrics"
        ])
        const responses = spec.paths["/v1/workspaces/{workspace}/queue"]?.["get"]?.responses ?? {}
        for (const status of ["200", "400", "401", "403", "404", "500", "503"]) assert.property(responses, status)
      }), { timeout: 60_000 })

    it.effect(
      "creating workspaces: admin only (401 without a token, 403 with another), 201, then 409",
      () =>
        Effect.gen(function*() {
          const api = yield* server
          const body = { name: "acme" }
          const noToken = yield* request(api, "POST", "/v1/workspaces", { body })
          assert.strictEqual(noToken.status, 401)
          assert.include((noToken.json as { detail: string }).detail, "bearer token")
          assert.strictEqual(
            (yield* request(api, "POST", "/v1/workspaces", { body, token: "not-the-admin" })).status,
            403
          )
          const created = yield* request(api, "POST", "/v1/workspaces", { body, token: adminToken })
          assert.strictEqual(created.status, 201)
          const { name, token } = created.json as { name: string; token: string }
          assert.strictEqual(name, "acme")
          assert.isTrue(token.length >= 32)
          const again = yield* request(api, "POST", "/v1/workspaces", { body, token: adminToken })
          assert.strictEqual(again.status, 409)
          assert.deepStrictEqual(again.json, { detail: "Workspace \"acme\" already exists" })
        }),
      { timeout: 60_000 }
    )

    it.effect(
      "workspace routes: 401 without a token, 403 with another workspace's, 404 for an unknown workspace",
      () =>
        Effect.gen(function*() {
          const api = yield* server
          const mine = yield* createWorkspace(api, "mine")
          const theirs = yield* createWorkspace(api, "theirs")
          const messages = { messages: [{ peer: "alice", content: "hello" }] }
          const path = "/v1/workspaces/mine/sessions/s1/messages"
          assert.strictEqual((yield* request(api, "POST", path, { body: messages })).status, 401)
          assert.strictEqual((yield* request(api, "GET", "/v1/workspaces/mine/queue")).status, 401)
          const forbidden = yield* request(api, "POST", path, { body: messages, token: theirs })
          assert.strictEqual(forbidden.status, 403)
          assert.include((forbidden.json as { detail: string }).detail, "mine")
          assert.strictEqual((yield* request(api, "GET", "/v1/workspaces/mine/queue", { token: theirs })).status, 403)
          const unknown = yield* request(api, "GET", "/v1/workspaces/nobody/queue", { token: mine })
          assert.strictEqual(unknown.status, 404)
          assert.deepStrictEqual(unknown.json, { detail: "Workspace \"nobody\" does not exist" })
          const stored = yield* request(api, "POST", path, { body: messages, token: mine })
          assert.strictEqual(stored.status, 201)
          assert.deepStrictEqual(stored.json, { stored: 1, enqueued: 1 })
          const queue = yield* request(api, "GET", "/v1/workspaces/mine/queue", { token: mine })
          assert.deepStrictEqual(queue.json, queueStatus({ pending: 1 }))
          const theirQueue = yield* request(api, "GET", "/v1/workspaces/theirs/queue", { token: theirs })
          assert.deepStrictEqual(theirQueue.json, queueStatus())
          const none = yield* request(api, "GET", "/v1/workspaces/mine/peers/alice/representation", { token: mine })
          assert.strictEqual(none.status, 404)
        }),
      { timeout: 60_000 }
    )

    it.effect(
      "validation: malformed JSON, missing fields, unsafe names and oversized bodies are 4xx that say what",
      () =>
        Effect.gen(function*() {
          const { api, token } = yield* serverWithWorkspace("valid")
          const path = "/v1/workspaces/valid/sessions/s1/messages"
          const detail = (reply: { json: unknown }) => (reply.json as { detail: string }).detail

          const malformed = yield* request(api, "POST", path, { token, rawBody: "{\"messages\": [" })
          assert.strictEqual(malformed.status, 400)
          assert.include(detail(malformed), "JSON")

          const missing = yield* request(api, "POST", path, { token, body: {} })
          assert.strictEqual(missing.status, 400)
          assert.strictEqual(detail(missing), "Invalid request body: messages: Missing key")

          const missingPeer = yield* request(api, "POST", path, { token, body: { messages: [{ content: "x" }] } })
          assert.strictEqual(missingPeer.status, 400)
          assert.strictEqual(detail(missingPeer), "Invalid request body: messages[0].peer: Missing key")

          const empty = yield* request(api, "POST", path, { token, body: { messages: [] } })
          assert.strictEqual(empty.status, 400)
          assert.include(detail(empty), "messages")

          const unsafeBody = yield* request(api, "POST", "/v1/workspaces", {
            token: adminToken,
            body: { name: "a;drop table" }
          })
          assert.strictEqual(unsafeBody.status, 400)
          assert.include(detail(unsafeBody), "name")
          const tooLongName = yield* request(api, "POST", "/v1/workspaces", {
            token: adminToken,
            body: { name: "a".repeat(65) }
          })
          assert.strictEqual(tooLongName.status, 400)

          const unsafePath = yield* request(api, "GET", "/v1/workspaces/bad%20name%3B/queue", { token })
          assert.strictEqual(unsafePath.status, 400)
          assert.include(detail(unsafePath), "Invalid path parameter: workspace")

          const unsafePeer = yield* request(api, "POST", path, {
            token,
            body: { messages: [{ peer: "al ice", content: "x" }] }
          })
          assert.strictEqual(unsafePeer.status, 400)
          assert.include(detail(unsafePeer), "messages[0].peer")

          const longContent = yield* request(api, "POST", path, {
            token,
            body: { messages: [{ peer: "alice", content: "x".repeat(Model.maxContentLength + 1) }] }
          })
          assert.strictEqual(longContent.status, 400)
          assert.include(detail(longContent), "messages[0].content")

          const badTime = yield* request(api, "POST", path, {
            token,
            body: { messages: [{ peer: "alice", content: "x" }], deriveAt: "tomorrow" }
          })
          assert.strictEqual(badTime.status, 400)
          assert.include(detail(badTime), "deriveAt")
          assert.include(detail(badTime), "ISO 8601")
          // A valid one: the representation task waits for it (no deriver runs here); the queue says so.
          const later = yield* request(api, "POST", path, {
            token,
            body: {
              messages: [{ peer: "alice", content: "x" }],
              deriveAt: new Date(Date.now() + 3_600_000).toISOString()
            }
          })
          assert.strictEqual(later.status, 201)
          const queue = yield* request(api, "GET", "/v1/workspaces/valid/queue", { token })
          assert.deepStrictEqual(queue.json, queueStatus({ waiting: 1 }))

          const oversized = yield* request(api, "POST", path, {
            token,
            body: { messages: Array.from({ length: 50 }, () => ({ peer: "alice", content: "x".repeat(5_000) })) }
          })
          assert.strictEqual(oversized.status, 413)
          assert.deepStrictEqual(oversized.json, { detail: "Request body exceeds 65536 bytes" })
        }),
      { timeout: 60_000 }
    )

    it.effect("a typed client derived from the API definition", () =>
      Effect.gen(function*() {
        const api = yield* server
        const admin = yield* HttpApiClient.make(Api.Api, { baseUrl: api.baseUrl }).pipe(
          Effect.provide(HttpApiMiddleware.layerClient(Security.AdminAuth, ({ next, request }) =>
            next(HttpClientRequest.bearerToken(request, adminToken)))),
          Effect.provide(HttpApiMiddleware.layerClient(Security.WorkspaceAuth, ({ next, request }) =>
            next(request)))
        )
        const created = yield* admin.admin.createWorkspace({ payload: { name: "typed" } })
        assert.strictEqual(created.name, "typed")
        const conflict = yield* Effect.flip(admin.admin.createWorkspace({ payload: { name: "typed" } }))
        assert.instanceOf(conflict, Errors.Conflict)
        const client = yield* HttpApiClient.make(Api.Api, { baseUrl: api.baseUrl }).pipe(
          Effect.provide(HttpApiMiddleware.layerClient(Security.AdminAuth, ({ next, request }) => next(request))),
          Effect.provide(HttpApiMiddleware.layerClient(Security.WorkspaceAuth, ({ next, request }) =>
            next(HttpClientRequest.bearerToken(request, created.token))))
        )
        const append = client.workspace.appendMessages({
          params: { workspace: "typed", session: "s" },
          headers: { "idempotency-key": "typed-1" },
          payload: { messages: [{ peer: "bob", content: "typed clients are nice" }] }
        })
        assert.deepStrictEqual(yield* append, { stored: 1, enqueued: 1 })
        // Sent again with its key (the client did not learn the outcome): the first response, nothing stored.
        assert.deepStrictEqual(yield* append, { stored: 1, enqueued: 1 })
        const health = yield* client.healthz()
        assert.deepStrictEqual(health, { status: "ok" })
      }).pipe(Effect.provide(FetchHttpClient.layer)), { timeout: 60_000 })

    it.effect(
      "one connection attempt per request, also when it is healthy (token check + work share a checkout)",
      () =>
        Effect.gen(function*() {
          const db = yield* TestDatabase
          const target = new URL(db.url)
          const proxy = yield* CountingProxy.start({ host: target.hostname, port: Number(target.port) })
          const api = yield* start({ url: proxy.url(db.url), schema: "counted" })
          const token = yield* createWorkspace(api, "counted")
          const before = yield* proxy.attempts
          const replies = [
            yield* request(api, "POST", "/v1/workspaces/counted/sessions/s/messages", {
              token,
              body: { messages: [{ peer: "p", content: "one" }, { peer: "q", content: "two" }] }
            }),
            yield* request(api, "GET", "/v1/workspaces/counted/queue", { token }),
            yield* request(api, "GET", "/v1/workspaces/counted/peers/p/representation", { token }),
            yield* request(api, "GET", "/readyz")
          ]
          assert.deepStrictEqual(replies.map((r) => r.status), [201, 200, 404, 200])
          assert.strictEqual((yield* proxy.attempts) - before, replies.length)
          yield* request(api, "GET", "/healthz")
          yield* request(api, "GET", "/metrics")
          assert.strictEqual(
            (yield* proxy.attempts) - before,
            replies.length,
            "healthz and metrics do not touch the database"
          )
        }),
      { timeout: 60_000 }
    )

    it.effect("several instances starting at once migrate the same schema safely", () =>
      Effect.gen(function*() {
        const db = yield* TestDatabase
        const servers = yield* Effect.all(
          Array.from({ length: 4 }, () => start({ url: db.url, schema: "concurrent" })),
          { concurrency: "unbounded" }
        )
        for (const api of servers) assert.strictEqual((yield* request(api, "GET", "/readyz")).status, 200)
        const token = yield* createWorkspace(servers[0]!, "shared")
        const queue = yield* request(servers[3]!, "GET", "/v1/workspaces/shared/queue", { token })
        assert.strictEqual(queue.status, 200)
      }), { timeout: 60_000 })

    it.effect(
      "round trip: create a workspace, post messages, run a deriver, read the representation",
      () =>
        Effect.gen(function*() {
          const { api, token } = yield* serverWithWorkspace("acme", { schema: "roundtrip" })
          const posted = yield* request(api, "POST", "/v1/workspaces/acme/sessions/chat-1/messages", {
            token,
            body: {
              messages: [
                { peer: "alice", content: "Postgres pooling saturation needs jitter" },
                { peer: "alice", content: "jitter spreads the herd; jitter again" },
                { peer: "bob", content: "hello alice" }
              ]
            }
          })
          assert.strictEqual(posted.status, 201)

          const schema = SchemaName.makeUnsafe("roundtrip")
          const config = yield* DeriverConfig.make({
            pollingSleepIntervalSeconds: 0.05,
            pollingSleepMaxIntervalSeconds: 0.2,
            pollingStartupJitterSeconds: 0
          })
          const db = yield* TestDatabase
          const deriverDb = yield* Layer.build(
            DbSession.layer({ url: db.url, connectTimeout: "2 seconds", poolClass: "null", poolSize: 4, driver: "pg" })
          )
          yield* Deriver.start({ schema, handlers: Domain.handlers(schema), config }).pipe(
            Effect.provideContext(deriverDb)
          )
          const representation = yield* request(api, "GET", "/v1/workspaces/acme/peers/alice/representation", { token })
            .pipe(
              Effect.flatMap((reply) => reply.status === 200 ? Effect.succeed(reply) : Effect.fail(reply)),
              Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo({ duration: "20 seconds" })))
            )
          const body = representation.json as {
            workspace: string
            peer: string
            messageCount: number
            topTerms: ReadonlyArray<{ term: string; count: number }>
          }
          assert.strictEqual(body.workspace, "acme")
          assert.strictEqual(body.peer, "alice")
          assert.strictEqual(body.messageCount, 2)
          assert.strictEqual(body.topTerms[0]?.term, "jitter")
          const queue = yield* request(api, "GET", "/v1/workspaces/acme/queue", { token }).pipe(
            Effect.flatMap((reply) =>
              (reply.json as { processed: number }).processed === 2 ? Effect.succeed(reply) : Effect.fail(reply)
            ),
            Effect.retry(Schedule.spaced("100 millis").pipe(Schedule.upTo({ duration: "20 seconds" })))
          )
          assert.deepStrictEqual(queue.json, queueStatus({ processed: 2 }))
        }),
      { timeout: 90_000 }
    )
  })
})
