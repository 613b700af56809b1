/**
 * Sums every package's Vitest JSON report (test-results/vitest.json) into the closing line CI reads:
 * `N passed, N failed` (and `, N skipped` when some were), after each package's wall time (from its start to
 * its last file's end) and the slowest files. Exits non-zero when a package that has tests wrote no report,
 * so a suite that crashed before reporting is never counted as green. A report Turbo restored from its cache
 * carries the time of the run that made it.
 *
 * Scenarios are tests too long for `npm test` (a package's `test:scenario` script, which reports to
 * test-results/scenario.json; `.ci/run` runs each as its own timed step). With `--scenarios` each such package
 * must have that report too, and its tests are summed with the rest; without it, a scenario report is not read.
 *
 * Reports of the same tests on other PostgreSQL builds (test-results/postgres-<build>.json: `.ci/run`'s run on
 * Debian's PostgreSQL, scripts/test-postgres-builds.sh) are summed too, whenever present: npm test deletes them with
 * the rest of test-results, and the steps that write them fail themselves when a run writes none.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"

interface VitestReport {
  readonly numPassedTests: number
  readonly numFailedTests: number
  readonly numPendingTests: number
  readonly numTodoTests: number
  readonly startTime: number
  readonly testResults: ReadonlyArray<{ readonly name: string; readonly startTime: number; readonly endTime: number }>
}

const root = join(import.meta.dirname, "..")
// A folder without a package.json (one being set up under labs/) is not a workspace: Turbo runs nothing there.
const workspaces = ["packages", "apps", "labs", "tools"].flatMap((group) =>
  readdirSync(join(root, group)).map((name) => join(root, group, name))
    .filter((workspace) => existsSync(join(workspace, "package.json")))
)

const withScenarios = process.argv.includes("--scenarios")
/** The packages with a `test:scenario` script. */
const hasScenario = (workspace: string) =>
  (JSON.parse(readFileSync(join(workspace, "package.json"), "utf8")) as { scripts?: Record<string, string> })
    .scripts?.["test:scenario"] !== undefined

let passed = 0
let failed = 0
let skipped = 0
const missing: Array<string> = []
const times: Array<
  { readonly name: string; readonly start: number; readonly seconds: number; readonly tests: number }
> = []
const files: Array<{ readonly name: string; readonly seconds: number }> = []
/** Counts one report: its tests, its wall time and each file's (named with `build`, the server, when not the default). */
function add(name: string, report: VitestReport, build = "") {
  const end = Math.max(report.startTime, ...report.testResults.map((result) => result.endTime))
  const tests = report.numPassedTests + report.numFailedTests
  times.push({ name, start: report.startTime, seconds: (end - report.startTime) / 1000, tests })
  for (const result of report.testResults) {
    files.push({ name: relative(root, result.name) + build, seconds: (result.endTime - result.startTime) / 1000 })
  }
  passed += report.numPassedTests
  failed += report.numFailedTests
  skipped += report.numPendingTests + report.numTodoTests
}

for (const workspace of workspaces) {
  if (!existsSync(join(workspace, "test"))) continue
  const reports = ["vitest.json", ...(withScenarios && hasScenario(workspace) ? ["scenario.json"] : [])]
  for (const report of reports) {
    const name = workspace.slice(root.length + 1) + (report === "scenario.json" ? " (scenario)" : "")
    const file = join(workspace, "test-results", report)
    if (existsSync(file)) add(name, JSON.parse(readFileSync(file, "utf8")) as VitestReport)
    else missing.push(name)
  }
  const results = join(workspace, "test-results")
  const builds = existsSync(results) ? readdirSync(results).filter((file) => /^postgres-.+\.json$/.test(file)) : []
  for (const report of builds.toSorted()) {
    const build = ` (${report.slice(0, -".json".length)})`
    add(workspace.slice(root.length + 1) + build, JSON.parse(readFileSync(join(results, report), "utf8")), build)
  }
}

const row = (seconds: number, label: string) => `${seconds.toFixed(1).padStart(7)} s  ${label}`
// When each began, from the first package's start: where the run's minutes went, and what ran last.
const first = Math.min(...times.map((time) => time.start))
console.log("wall time per package (slowest first; started at +s from the first package's start):")
for (const { name, start, seconds, tests } of times.toSorted((a, b) => b.seconds - a.seconds)) {
  console.log(`${row(seconds, `${name} (${tests} tests)`)}  +${((start - first) / 1000).toFixed(0)}`)
}
console.log("slowest files:")
for (const { name, seconds } of files.toSorted((a, b) => b.seconds - a.seconds).slice(0, 8)) {
  console.log(row(seconds, name))
}
if (missing.length > 0) console.log(`no Vitest report from: ${missing.join(", ")}`)
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`)
process.exit(missing.length > 0 || failed > 0 ? 1 : 0)
