/**
 * Consumer test 3: the published client against our API (API_URL, API_ADMIN_TOKEN): readiness, a workspace,
 * a message, its queue status, and (once the deriver has run) the peer's representation.
 */
import { ApiClient } from "@resilience/api-client"
import type { Model } from "@resilience/model"
import { Effect, Option } from "effect"
import { FetchHttpClient } from "effect/http"

const program = Effect.gen(function*() {
  const api = yield* ApiClient.make({ baseUrl: process.env["API_URL"]!, maxAttempts: 20, maxDelay: "1 second" })
  yield* api.readyz
  const { token } = yield* api.createWorkspace({ adminToken: process.env["API_ADMIN_TOKEN"]!, name: "consumer" })
  const messages: ReadonlyArray<Model.NewMessage> = [{ peer: "alice", content: "hello from a tenant service" }]
  const appended = yield* api.appendMessages({ token, workspace: "consumer", session: "s1", messages })
  if (appended.stored !== 1) return yield* Effect.die(new Error(`client: stored ${appended.stored}`))
  let representation: Option.Option<Model.Representation> = Option.none()
  for (let i = 0; i < 100 && Option.isNone(representation); i++) {
    yield* Effect.sleep("200 millis")
    representation = yield* api.representation({ token, workspace: "consumer", peer: "alice" })
  }
  if (Option.isNone(representation) || representation.value.messageCount !== 1) {
    return yield* Effect.die(new Error("client: no representation derived"))
  }
  const status = yield* api.queueStatus({ token, workspace: "consumer" })
  yield* Effect.log(`client: workspace created, 1 message stored and derived, queue ${JSON.stringify(status)}`)
})

await Effect.runPromise(program.pipe(Effect.provide(FetchHttpClient.layer)))
