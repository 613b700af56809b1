import { assert, describe, it } from "@effect/vitest"
import { Checker } from "@resilience/checker"
import { Orphans } from "@resilience/local-postgres"
import { Effect, Random } from "effect"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import * as Report from "../../src/Report.ts"
import * as Scenario from "../../src/Scenario.ts"
import * as SystemPackages from "../../src/SystemPackages.ts"

const skip = SystemPackages.skipReason()

/** This process's lab directories, and every process whose command line names one. */
const leftovers = () => {
  const prefix = `${process.pid}-failover-`
  const directories = existsSync(Orphans.root)
    ? readdirSync(Orphans.root).filter((name) => name.startsWith(prefix))
    : []
  const processes = readdirSync("/proc").filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
    const cmdline = Effect.runSync(
      Effect.orElseSucceed(Effect.try(() => readFileSync(`/proc/${pid}/cmdline`, "utf8")), () => "")
    )
    return cmdline.includes(`${Orphans.root}/${prefix}`)
  })
  return { directories, processes }
}

describe.skipIf(skip !== undefined)(`failover lab${skip === undefined ? "" : ` (skipped: ${skip})`}`, () => {
  it.live(
    "a switchover with synchronous_mode: no 500, every 503 with Retry-After, the checker's verdict valid, no restart",
    () =>
      Effect.gen(function*() {
        const binaries = SystemPackages.find()
        if (binaries instanceof SystemPackages.SystemPackagesMissing) return yield* Effect.die(binaries)
        const result = yield* Scenario.run({
          settings: {
            ...Scenario.defaults,
            fault: "switchover",
            synchronousMode: true,
            rate: 10,
            warmupSeconds: 3,
            afterSeconds: 2
          },
          binaries,
          log: (line) => console.error(line)
        }).pipe(Random.withSeed("ci"))
        console.log(`${Report.scenario(result)}\n\n${Checker.table(result.verdict)}`)
        const f = result.figures
        assert.isTrue(result.verdict.valid, Checker.table(result.verdict))
        assert.strictEqual(f.internalErrors, 0)
        assert.strictEqual(f.unavailableWithoutRetryAfter, 0)
        assert.strictEqual(f.transportFailures, 0)
        assert.strictEqual(result.processesExited, 0)
        assert.isAbove(f.acknowledged, 0)
        assert.isTrue(result.members.includes("leader"), result.members)
        assert.deepStrictEqual(leftovers(), { directories: [], processes: [] })
      }),
    { timeout: 300_000 }
  )
})
