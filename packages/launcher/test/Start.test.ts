import { assert, describe, layer } from "@effect/vitest"
import { Cluster, Orphans } from "@resilience/local-postgres"
import { TestDatabase } from "@resilience/test-db"
import { Duration, Effect, Option, Schema } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ApiClient from "../src/ApiClient.ts"
import * as Stack from "../src/Stack.ts"

const Created = Schema.Struct({ name: Schema.String, token: Schema.String })
const Derived = Schema.Struct({ messageCount: Schema.Number })

/** Reads a peer's representation until the deriver has counted `messages` of theirs (client-side polling). */
const awaitRepresentation = (apiUrl: string, workspace: typeof Created.Type, peer: string, messages: number) =>
  Effect.gen(function*() {
    for (let poll = 0; poll < 120; poll++) {
      const response = yield* ApiClient.send(
        apiUrl,
        "GET",
        `/v1/workspaces/${workspace.name}/peers/${peer}/representation`,
        {
          token: workspace.token
        }
      )
      if (response.status === 200 && Schema.decodeUnknownSync(Derived)(response.body).messageCount === messages) {
        return response.body
      }
      yield* Effect.sleep(Duration.millis(250))
    }
    return yield* Effect.die(new Error(`no representation of ${peer} with ${messages} messages within 30 s`))
  })

/** The suite's database URL and two free ports (the API's and the deriver's metrics). */
const databaseAndPorts = Effect.all({
  url: Effect.map(Effect.service(TestDatabase), (database) => database.url),
  apiPort: Cluster.freePort,
  metricsPort: Cluster.freePort
})

describe("the production entry points", () => {
  layer(TestDatabase.layer, { excludeTestServices: true })((it) => {
    it.effect("serve a round trip: API stores and enqueues, the deriver derives, the API reads it back", () =>
      Effect.gen(function*() {
        const { apiPort, metricsPort: deriverMetricsPort, url } = yield* databaseAndPorts
        const stack = yield* Stack.start({
          databaseUrl: Option.some(url),
          embedded: { directory: undefined, port: 0, maxConnections: 0 },
          apiPort,
          deriverMetricsPort,
          adminToken: "test-admin-token",
          env: { DB_SCHEMA: "tenant_e2e", DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0", DERIVER_MIGRATE: "true" },
          onLine: () => undefined
        })
        const created = yield* ApiClient.expect([201], stack.apiUrl, "POST", "/v1/workspaces", {
          token: "test-admin-token",
          body: { name: "acme" }
        })
        const workspace = Schema.decodeUnknownSync(Created)(created.body)
        yield* ApiClient.expect([201], stack.apiUrl, "POST", "/v1/workspaces/acme/sessions/s1/messages", {
          token: workspace.token,
          body: { messages: [{ peer: "alice", content: "hello pooled world" }, { peer: "alice", content: "again" }] }
        })
        const representation = yield* awaitRepresentation(stack.apiUrl, workspace, "alice", 2)
        assert.deepInclude(representation as object, { peer: "alice", messageCount: 2 })
        const metrics = yield* Effect.promise(() => fetch(stack.deriverMetricsUrl).then((r) => r.text()))
        assert.match(metrics, /deriver_polls_total/)
      }).pipe(Effect.scoped))
  })

  layer(TestDatabase.layer, { excludeTestServices: true })((it) => {
    it.effect("npm start's launcher stops the deriver, the API and itself on SIGTERM, exit code 0, no orphans", () =>
      Effect.gen(function*() {
        const { apiPort, metricsPort, url } = yield* databaseAndPorts
        const dataDirectory = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "launcher-test-"))),
          (directory) => Effect.sync(() => rmSync(directory, { recursive: true, force: true }))
        )
        const launcher = spawn(process.execPath, [
          "--conditions=@resilience/source",
          join(Stack.repositoryRoot, "packages/launcher/src/bin/start.ts")
        ], {
          env: {
            ...process.env,
            DATABASE_URL: url,
            DB_SCHEMA: "tenant_sigterm",
            API_PORT: String(apiPort),
            DERIVER_METRICS_PORT: String(metricsPort),
            DERIVER_MIGRATE: "true",
            RESILIENCE_DATA_DIR: dataDirectory
          },
          stdio: ["ignore", "pipe", "pipe"]
        })
        let output = ""
        const pids = yield* Effect.callback<ReadonlyArray<number>>((resume) => {
          const onData = (chunk: Buffer) => {
            output += chunk.toString("utf8")
            const match = /api pid (\d+), deriver pid (\d+)/.exec(output)
            if (match !== null && output.includes("\nready\n")) {
              resume(Effect.succeed([Number(match[1]), Number(match[2])]))
            }
          }
          launcher.stdout.on("data", onData)
          launcher.stderr.on("data", onData)
          launcher.once("exit", (code) => resume(Effect.die(new Error(`launcher exited ${code}: ${output}`))))
        })
        assert.match(
          output,
          /curl -sS -X POST http:\/\/127\.0\.0\.1:\d+\/v1\/workspaces\/demo-tenant_sigterm\/sessions/
        )
        for (const pid of pids) assert.isTrue(Orphans.isAlive(pid))
        launcher.kill("SIGTERM")
        const code = yield* Effect.callback<number | null>((resume) => {
          if (launcher.exitCode !== null) resume(Effect.succeed(launcher.exitCode))
          else launcher.once("exit", (exitCode) => resume(Effect.succeed(exitCode)))
        })
        assert.strictEqual(code, 0, output)
        for (const pid of pids) assert.isFalse(Orphans.isAlive(pid), `pid ${pid} outlived the launcher`)
      }).pipe(Effect.scoped))
  })
})
