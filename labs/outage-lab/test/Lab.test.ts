/**
 * The outage lab's CLI as its own process, on real parts (PostgreSQL, PgBouncer, deriver loops, API traffic).
 *
 * Issue #22: the run was 14 s (trigger at 4 s, a 4 s stall); the same run scaled to 9 s (trigger at 3 s, a 3 s
 * stall, 3 s after it): the stall still fills the pooler to max_client_conn (40 requests/s against 25 clients).
 */
import { assert, describe, it } from "@effect/vitest"
import { Orphans } from "@resilience/local-postgres"
import { PgBouncer } from "@resilience/test-db"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const horizon = 9
const bin = join(import.meta.dirname, "..", "src", "bin", "lab.ts")

/** Runs the lab CLI as its own process, as `npm run lab` does, and waits for it to exit by itself. */
const lab = (args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string; pid: number; seconds: number }>((resolve) => {
    const started = performance.now()
    const child = execFile(
      process.execPath,
      ["--conditions=@resilience/source", bin, ...args],
      { timeout: 170_000, killSignal: "SIGKILL" },
      (error, stdout, stderr) =>
        resolve({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          stdout,
          stderr,
          pid: child.pid ?? 0,
          seconds: (performance.now() - started) / 1000
        })
    )
  })

describe.skipIf(PgBouncer.skipReason() !== undefined)("outage lab: a small run on real parts", () => {
  it(
    "saturates the pooler, stops by itself within its horizon, its writes check out, and it leaves no process behind",
    async () => {
      const directory = mkdtempSync(join(tmpdir(), "outage-lab-test-"))
      const json = join(directory, "run.json")
      const result = await lab([
        "run",
        "--policy",
        "baseline",
        "--derivers",
        "10",
        "--max-connections",
        "12",
        "--pool-size",
        "2",
        "--max-client-conn",
        "25",
        "--api-rps",
        "40",
        "--trigger-at",
        "3",
        "--stall-seconds",
        "3",
        "--horizon",
        String(horizon),
        "--writes",
        "--json",
        json
      ])
      assert.strictEqual(result.code, 0, `${result.stdout}\n${result.stderr}`)
      // the horizon, plus set-up (cluster, pooler, schemas) and teardown; far below the hard deadline
      assert.isBelow(result.seconds, horizon + 90)
      const document = JSON.parse(readFileSync(json, "utf8")) as {
        pids: { postgres: number; pgbouncer: number }
        summary: { rejections: number; peakClientConnections: number; connectionAttempts: number; polls: number }
        lab: {
          secondsAtClientLimit: number
          failures: Record<string, number>
          sampleRate: number
          apiArrived: number
          consistency: {
            valid: boolean
            totals: { acknowledged: number; unknown: number; stored: number; counted: number }
          }
        }
        series: { clientConnections: Array<number> }
      }
      rmSync(directory, { recursive: true, force: true })
      // the stall really filled the pooler: PgBouncer refused clients at max_client_conn
      assert.isAbove(document.summary.rejections, 0)
      assert.isAbove(document.lab.failures["api:checkout:Saturated"] ?? 0, 0)
      assert.isAbove(document.lab.secondsAtClientLimit, 0)
      // and the baseline's removed loop tried refused checkouts again: more attempts than requests and polls
      assert.isAbove(document.summary.connectionAttempts, document.lab.apiArrived + document.summary.polls)
      assert.strictEqual(document.series.clientConnections.length, horizon)
      assert.isAbove(document.lab.sampleRate, 3)
      // the API's appends (--writes): every acknowledged one stored and derived once, the refused ones nowhere; a
      // write whose answer was lost (unknown) may or may not be stored, and is derived once when it is
      assert.isTrue(document.lab.consistency.valid, result.stderr)
      const { acknowledged, counted, stored, unknown } = document.lab.consistency.totals
      assert.isAbove(acknowledged, 0)
      assert.isAtLeast(stored, acknowledged)
      assert.isAtMost(stored, acknowledged + unknown)
      assert.strictEqual(counted, stored)
      // nothing left behind: both servers gone, no server directory owned by the run
      assert.isAbove(document.pids.postgres, 0)
      assert.isAbove(document.pids.pgbouncer, 0)
      assert.isFalse(Orphans.isAlive(document.pids.postgres), "postgres still running")
      assert.isFalse(Orphans.isAlive(document.pids.pgbouncer), "pgbouncer still running")
      const leftovers = existsSync(Orphans.root)
        ? readdirSync(Orphans.root).filter((name) => name.startsWith(`${result.pid}-`))
        : []
      assert.deepStrictEqual(leftovers, [])
    },
    180_000
  )
})
