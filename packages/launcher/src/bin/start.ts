/** `npm start`: the whole system on one machine (see Stack.ts), with a ready banner. */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ApiClient } from "@resilience/api-client"
import { Variables } from "@resilience/environment"
import { Otlp } from "@resilience/telemetry"
import { Effect } from "effect"
import { FetchHttpClient } from "effect/http"
import { randomBytes } from "node:crypto"
import { join } from "node:path"
import * as Banner from "../Banner.ts"
import * as DemoWorkspace from "../DemoWorkspace.ts"
import * as LocalConfig from "../LocalConfig.ts"
import * as Stack from "../Stack.ts"
import * as Teardown from "../Teardown.ts"

const main = Effect.gen(function*() {
  const local = yield* LocalConfig.config
  const adminToken = local.adminToken._tag === "Some" ? local.adminToken.value : randomBytes(24).toString("base64url")
  yield* Effect.log(
    LocalConfig.isEmbedded(local)
      ? `starting embedded PostgreSQL in ${local.dataDirectory}/postgres`
      : "using DATABASE_URL"
  )
  const stack = yield* Stack.start({
    databaseUrl: local.databaseUrl,
    embedded: {
      directory: join(local.dataDirectory, "postgres"),
      port: local.embeddedPort,
      maxConnections: 100
    },
    apiPort: local.apiPort,
    deriverMetricsPort: local.deriverMetricsPort,
    adminToken,
    env: {
      [Variables.schema]: local.schema,
      // One local instance: a short startup window so the first poll comes quickly (production keeps 30 s).
      [Variables.deriver.pollingStartupJitterSeconds]: process.env[Variables.deriver.pollingStartupJitterSeconds] ?? "2"
    },
    onLine: (name, line) => console.log(`[${name}] ${line}`)
  })
  const client = yield* ApiClient.make({ baseUrl: stack.apiUrl }).pipe(Effect.orDie)
  const workspace = yield* DemoWorkspace.ensure({
    client,
    adminToken,
    // Kept beside the data it belongs to: deleting .data/postgres forgets the workspace too.
    directory: LocalConfig.isEmbedded(local) ? join(local.dataDirectory, "postgres") : local.dataDirectory,
    name: LocalConfig.isEmbedded(local) ? "demo" : `demo-${local.schema}`
  })
  console.log(Banner.render({
    stack,
    dataDirectory: local.dataDirectory,
    adminToken,
    adminTokenGenerated: local.adminToken._tag === "None",
    workspace
  }))
  return yield* Stack.awaitUnexpectedExit(stack)
}).pipe(Effect.scoped, Effect.provide([FetchHttpClient.layer, Otlp.layerFromEnv("resilience-launcher")]))

NodeRuntime.runMain(main, { teardown: Teardown.stopIsSuccess })
