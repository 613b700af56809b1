/**
 * Sums every package's Vitest JSON report (test-results/vitest.json) into the closing line CI reads:
 * `N passed, N failed` (and `, N skipped` when some were). Exits non-zero when a package that has tests
 * wrote no report, so a suite that crashed before reporting is never counted as green.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

interface VitestReport {
  readonly numPassedTests: number
  readonly numFailedTests: number
  readonly numPendingTests: number
  readonly numTodoTests: number
}

const root = join(import.meta.dirname, "..")
const workspaces = ["packages", "apps"].flatMap((group) =>
  readdirSync(join(root, group)).map((name) => join(root, group, name))
)

let passed = 0
let failed = 0
let skipped = 0
const missing: Array<string> = []
for (const workspace of workspaces) {
  if (!existsSync(join(workspace, "test"))) continue
  const file = join(workspace, "test-results", "vitest.json")
  if (!existsSync(file)) {
    missing.push(workspace.slice(root.length + 1))
    continue
  }
  const report = JSON.parse(readFileSync(file, "utf8")) as VitestReport
  passed += report.numPassedTests
  failed += report.numFailedTests
  skipped += report.numPendingTests + report.numTodoTests
}

if (missing.length > 0) console.log(`no Vitest report from: ${missing.join(", ")}`)
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
process.exit(missing.length > 0 || failed > 0 ? 1 : 0)
