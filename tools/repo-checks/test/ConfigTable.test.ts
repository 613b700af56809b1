import { describe, expect, it } from "@effect/vitest"
import { type Config, ConfigProvider, Effect, Exit, Redacted } from "effect"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import * as ConfigTable from "../src/ConfigTable.ts"
import { repositoryRoot } from "../src/DocReferences.ts"
import * as Processes from "../src/Processes.ts"

type Env = Readonly<Record<string, string>>

const read = (config: Config.Config<unknown>, env: Env) =>
  Effect.runPromise(Effect.exit(config.parse(ConfigProvider.fromEnv({ env }))))

/** What a process read, comparable: redacted values shown, everything else as JSON. */
const comparable = (value: unknown): string =>
  JSON.stringify(value, (_key, inner) => (Redacted.isRedacted(inner) ? `redacted:${Redacted.value(inner)}` : inner))

const failure = (exit: Exit.Exit<unknown, unknown>): string => Exit.isFailure(exit) ? String(exit.cause) : ""

/** Every way the code disagrees with one row of the table, in words (empty: the row is right). */
const mismatches = async (
  rows: ReadonlyArray<ConfigTable.Row>,
  index: number,
  processes: Readonly<Record<string, Config.Config<unknown>>>
): Promise<ReadonlyArray<string>> => {
  const row = rows[index]!
  const values = Object.fromEntries(
    rows.map((each) => [each.variable, ConfigTable.documentedDefault(each.default) ?? ""])
  )
  const plan = ConfigTable.probes(row, rows[index - 1]?.variable, values)
  if (typeof plan === "string") return [plan]
  const found: Array<string> = []
  const { [row.variable]: _given, ...unsetEnv } = Processes.baseEnvironment
  const withValue = (value: string): Env => {
    // a probe above the documented value of a setting bounded below by this one raises that setting too
    const raised = ConfigTable.dependents(rows, row.variable).filter((dependent) =>
      values[dependent] !== "" && Number(value) > Number(values[dependent])
    )
    return { ...unsetEnv, ...Object.fromEntries(raised.map((dependent) => [dependent, value])), [row.variable]: value }
  }
  for (const reader of row.usedBy.flatMap(Processes.readersOf)) {
    const config = processes[reader]
    if (config === undefined) {
      found.push(`"${reader}" is not a process`)
      continue
    }
    const unset = await read(config, unsetEnv)
    for (const value of plan.accepted) {
      const exit = await read(config, withValue(value))
      if (Exit.isFailure(exit)) found.push(`${reader} rejects ${value} (table: ${row.allowed}): ${failure(exit)}`)
    }
    for (const value of plan.rejected) {
      const exit = await read(config, withValue(value))
      if (Exit.isSuccess(exit)) found.push(`${reader} accepts ${value} (table: ${row.allowed})`)
      else if (!failure(exit).includes(row.variable)) {
        found.push(`${reader} rejects ${value} without naming the variable`)
      }
    }
    if (plan.default !== undefined) {
      const exit = await read(config, withValue(plan.default))
      if (Exit.isFailure(unset) || Exit.isFailure(exit) || comparable(unset.value) !== comparable(exit.value)) {
        found.push(`${reader}: ${row.variable}=${plan.default} (the table's default) reads differently from unset`)
      }
    }
    if (plan.changes !== undefined) {
      const exit = await read(config, withValue(plan.changes))
      if (Exit.isFailure(exit)) found.push(`${reader} rejects ${plan.changes}: ${failure(exit)}`)
      else if (Exit.isSuccess(unset) && comparable(unset.value) === comparable(exit.value)) {
        found.push(`${reader} does not read ${row.variable}`)
      }
    }
  }
  return found
}

// The table lives under `## Configuration` in docs/configuration.md; the root README links there and keeps no copy.
const page = readFileSync(join(repositoryRoot, "docs", "configuration.md"), "utf8")
const rows = ConfigTable.parse(page)
const readme = readFileSync(join(repositoryRoot, "README.md"), "utf8")

describe("the configuration table (docs/configuration.md) against the code", () => {
  it("is there, and only there: the root README keeps no second copy", () => {
    expect(rows.length).toBeGreaterThan(0)
    expect(ConfigTable.parse(readme)).toEqual([])
  })

  it.each(rows.map((row, index) => [row.variable, index] as const))(
    "%s: default, allowed range and readers as the table says",
    async (_variable, index) => {
      expect(await mismatches(rows, index, Processes.processes)).toEqual([])
    }
  )

  it("every variable a process reads is in the table", async () => {
    const documented = new Set(rows.map((row) => row.variable))
    const read = new Set<string>()
    for (const config of Object.values(Processes.processes)) {
      const env = ConfigProvider.fromEnv({ env: Processes.baseEnvironment })
      const recording = ConfigProvider.make((path) => {
        read.add(path.join("_"))
        return env.load(path)
      })
      await Effect.runPromise(Effect.exit(config.parse(recording)))
    }
    expect([...read].filter((variable) => !documented.has(variable)).sort()).toEqual([])
  })

  it("fails on a planted mismatch: a cap the table does not show, a wrong default, a reader that does not read", async () => {
    const planted = rows.map((row) =>
      row.variable === "DB_POOL_SIZE"
        ? { ...row, default: "12", allowed: "integer ≥ 1" }
        : row.variable === "API_HOST"
        ? { ...row, usedBy: ["npm start"] }
        : row
    )
    const at = (variable: string) => planted.findIndex((row) => row.variable === variable)
    expect(await mismatches(planted, at("DB_POOL_SIZE"), Processes.processes)).toEqual([
      expect.stringMatching(/^API rejects 1000000000 \(table: integer ≥ 1\): .*between 1 and 10000/),
      "API: DB_POOL_SIZE=12 (the table's default) reads differently from unset",
      expect.stringMatching(/^deriver rejects 1000000000 \(table: integer ≥ 1\): .*between 1 and 10000/),
      "deriver: DB_POOL_SIZE=12 (the table's default) reads differently from unset"
    ])
    expect(await mismatches(planted, at("API_HOST"), Processes.processes)).toEqual([
      "npm start does not read API_HOST"
    ])
  })
})
