/**
 * `node --conditions=@resilience/source tools/release-check/src/bin/two-versions.ts --previous DIR --release NAME
 * [--logs DIR] [--writes N]`: {@link TwoVersions.run} with the previous release's tree built under `--previous` (its
 * apps' dist/) and this workspace's apps; prints each phase, its time and the checker's
 * verdicts; exits 1 naming the phase that failed. `scripts/two-versions.sh` builds the previous release and runs it.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import * as TwoVersions from "../TwoVersions.ts"

const { values } = parseArgs({
  options: {
    previous: { type: "string" },
    release: { type: "string" },
    logs: { type: "string" },
    writes: { type: "string", default: "24" }
  }
})
if (values.previous === undefined || values.release === undefined) {
  console.error("usage: two-versions.ts --previous DIR --release NAME [--logs DIR] [--writes N]")
  process.exit(2)
}
const logs = values.logs ?? mkdtempSync(join(tmpdir(), "two-versions-logs-"))
mkdirSync(logs, { recursive: true })
const root = resolve(import.meta.dirname, "../../../..")
const started = Date.now()

TwoVersions.run({
  previous: TwoVersions.built(values.release, resolve(values.previous)),
  current: TwoVersions.workspace(root),
  logs,
  writes: Number(values.writes)
}).pipe(
  Effect.scoped,
  Effect.matchEffect({
    onSuccess: () =>
      Effect.sync(() =>
        console.log(`two-versions: OK in ${((Date.now() - started) / 1000).toFixed(1)} s (logs: ${logs})`)
      ),
    onFailure: (error) =>
      Effect.sync(() => {
        console.error(`two-versions: FAIL in ${error.phase}: ${error.reason}\n(logs: ${logs})`)
        process.exitCode = 1
      })
  }),
  NodeRuntime.runMain
)
