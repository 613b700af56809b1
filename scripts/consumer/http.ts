/**
 * Consumer test 2: a tenant's own HTTP handler (node:http, no Effect HTTP) that maps a failed checkout to the
 * answer of @resilience/api-errors. The database is a closed port: the one attempt fails with
 * DatabaseUnavailable, and the handler must answer 503 with Retry-After and the documented body, fast.
 */
import { ErrorResponse } from "@resilience/api-errors"
import { DbSession } from "@resilience/db-session"
import { Effect } from "effect"
import { createServer } from "node:http"
import { type AddressInfo, createServer as createTcpServer } from "node:net"

const closedPort = await new Promise<number>((resolve) => {
  const probe = createTcpServer().listen(0, "127.0.0.1", () => {
    const { port } = probe.address() as AddressInfo
    probe.close(() => resolve(port))
  })
})

const session = DbSession.layer({
  url: `postgres://postgres:x@127.0.0.1:${closedPort}/postgres`,
  connectTimeout: "2 seconds",
  poolClass: "null",
  poolSize: 1,
  driver: "pg"
})

const server = createServer((_request, response) => {
  const query = Effect.gen(function*() {
    const db = yield* DbSession
    return yield* db.query("SELECT 1")
  })
  Effect.runPromise(query.pipe(Effect.provide(session), Effect.flip)).then(
    (failure) => {
      const { status, headers, body } = ErrorResponse.fromFailure(failure, { retryAfter: 2 })
      response.writeHead(status, headers).end(JSON.stringify(body))
    },
    () => response.writeHead(200).end("{}")
  )
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const { port } = server.address() as AddressInfo
const started = performance.now()
const answer = await fetch(`http://127.0.0.1:${port}/anything`)
const millis = performance.now() - started
const body = await answer.text()
server.close()
if (
  answer.status !== 503 || answer.headers.get("retry-after") !== "2" ||
  body !== "{\"detail\":\"database temporarily unavailable\"}" || millis > 2000
) {
  throw new Error(`http: ${answer.status} retry-after=${answer.headers.get("retry-after")} ${body} in ${millis} ms`)
}
console.log(`http: DatabaseUnavailable → 503, Retry-After: 2, ${body} in ${millis.toFixed(0)} ms`)
