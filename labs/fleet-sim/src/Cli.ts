/**
 * The `simulate` command line: `run` one scenario under one policy, `compare` the four policies, `sweep` a
 * grid for the vulnerable region. Effect at the edges (arguments, validation, files); the simulation itself
 * is plain synchronous code.
 *
 * @since 0.1.0
 */
import type { InvalidParameter } from "@resilience/parameters"
import { Console, Effect, FileSystem, Option } from "effect"
import { Command, Flag } from "effect/cli"
import * as Chart from "./Chart.ts"
import * as Model from "./Model.ts"
import * as Options from "./Options.ts"
import * as Report from "./Report.ts"
import * as Simulation from "./Simulation.ts"
import * as Summary from "./Summary.ts"
import * as Sweep from "./Sweep.ts"

const scenario = Flag.Literals("scenario", Model.scenarios).pipe(
  Flag.withDescription("restart | incident | spike | outage"),
  Flag.withDefault("incident" as Model.Scenario)
)
const seed = Flag.String("seed").pipe(Flag.withDescription("PRNG seed"), Flag.withDefault("1"))
const json = Flag.optional(Flag.String("json").pipe(Flag.withDescription("write summary and per-second series here")))
const chart = Flag.optional(Flag.String("chart").pipe(Flag.withDescription("write an SVG chart here")))
const initialInterval = Flag.Literals("initial-interval", ["base", "max"] as const).pipe(
  Flag.withDescription("where each schedule starts after the startup delay (DERIVER_POLLING_INITIAL_INTERVAL)"),
  Flag.withDefault("base" as const)
)
const overrideFlags = Object.fromEntries(
  Options.overrides.map((o) => [o.flag, Flag.optional(Flag.Finite(o.flag).pipe(Flag.withDescription(o.description)))])
) as Record<string, Flag.Flag<Option.Option<number>>>

const overrideValues = (values: Record<string, Option.Option<number>>): ReadonlyMap<string, number> =>
  new Map(
    Object.entries(values).flatMap(([k, v]) => Option.isSome(v) ? [[k, v.value] as const] : [])
  )

/** Prints progress on stderr (a single rewritten line when it is a terminal). */
const progress = (label: string) => (p: Simulation.Progress) => {
  const line = `${label}: ${(100 * p.simulatedSeconds / p.horizonSeconds).toFixed(0).padStart(3)}%  t=${
    Math.round(p.simulatedSeconds)
  }s  active=${p.activeBackends}  clients=${p.clientConnections}  events=${p.events}`
  if (process.stderr.isTTY) process.stderr.write(`\r${line}\u001b[K`)
  else process.stderr.write(`${line}\n`)
}
const clearProgress = () => {
  if (process.stderr.isTTY) process.stderr.write("\r\u001b[K")
}

const simulate = (params: Model.Params, label: string) =>
  Effect.sync(() => {
    const outcome = Simulation.run(params, { onProgress: progress(label) })
    clearProgress()
    return { outcome, summary: Summary.summarize(outcome) }
  })

const describe = (params: Model.Params, scenarioName: Model.Scenario) => {
  const acquisition = params.acquisition.kind === "failfast"
    ? `failfast (connect timeout ${params.acquisition.connectTimeoutMillis / 1000} s)`
    : `retry (${params.acquisition.retry.initialMillis / 1000} s initial, ${
      params.acquisition.retry.maxMillis / 1000
    } s max, ${params.acquisition.retry.budgetMillis / 1000} s budget)`
  return [
    `scenario ${scenarioName}: ${params.derivers} derivers, ${params.horizonSeconds} s simulated, seed ${params.seed}`,
    `poll ${params.poll.baseMillis / 1000}→${
      params.poll.maxMillis / 1000
    } s ×${params.poll.multiplier}, jitter ${params.poll.ratio}, startup jitter ${
      params.startupJitterMillis / 1000
    } s, schedule starts at ${params.initialInterval}; acquisition ${acquisition}`,
    `pooler: ${params.pooler.maxClientConnections} clients, ${params.pooler.backendCeiling} backends, ${params.pooler.threads} thread(s), ` +
    `connect ${params.pooler.connectCostMillis} ms, reject ${params.pooler.rejectCostMillis} ms, relay ${params.pooler.relayCostMillis} ms; ` +
    `database: ${params.database.cores} cores, claim ${params.database.claimMillis} ms, contention ${params.database.contention}; API ${params.api.requestsPerSecond} req/s` +
    (params.spike === undefined
      ? ""
      : `; spike at ${params.spike.atSeconds} s for ${params.spike.seconds} s holding ${params.spike.backends} backends`) +
    (params.outage === undefined
      ? ""
      : `; database down at ${params.outage.atSeconds} s for ${params.outage.seconds} s, resends within ${
        params.outage.resendWindowMillis / 1000
      } s`) +
    (params.wake === undefined || (!params.wake.enabled && params.wake.writeFraction === 0)
      ? ""
      : `; wake ${
        params.wake.enabled ? "on" : "off"
      }, writes ${params.wake.writeFraction} of API requests, wake delay ${params.wake.delayMillis} ms, woken polls ${params.wake.minIntervalMillis} ms apart at least`),
    ...describeAdaptive(params)
  ].join("\n")
}

/** The `adaptive` policy's settings, when the parameters have them. */
const describeAdaptive = (params: Model.Params): ReadonlyArray<string> => {
  const overload = params.overload
  const admission = params.admission
  if (overload === undefined && admission === undefined) return []
  const lines: Array<string> = []
  if (overload !== undefined) {
    lines.push(
      `adaptive deriver: slow poll > ${overload.slowPollMillis / 1000} s, overload cap ${
        overload.maxMillis / 1000
      } s, ×${overload.multiplier} per signal, gone within ${
        overload.recoveryMillis / 1000
      } s of healthy polls; claim timeout ${
        params.claimTimeoutMillis === 0 ? "none" : `${params.claimTimeoutMillis / 1000} s`
      }`
    )
  }
  if (admission !== undefined) {
    const gate = admission.gate
    lines.push(
      `adaptive API: ${admission.instances} instances, limit ${gate.minConcurrency}–${gate.maxConcurrency} (×${gate.decreaseRatio} on unavailable or > ${gate.slowMillis} ms), ` +
        `queue ${gate.queueTimeoutMillis} ms, circuit after ${gate.tripFailures} unavailable of ${
          2 * gate.tripFailures
        } for ${gate.openMillis} ms, ×2 per failed probe up to ${gate.openMaxMillis} ms, ±${
          gate.openJitterRatio * 100
        }%`
    )
  }
  return lines
}

const chartOf = (
  title: string,
  params: Model.Params,
  runs: ReadonlyArray<{ name: string; outcome: Simulation.Outcome }>
) =>
  Chart.timeSeries(title, [
    {
      title: "active backends (peak per second)",
      lines: runs.map((r) => ({ name: r.name, values: r.outcome.series.activeBackends })),
      rule: { label: `backend ceiling ${params.pooler.backendCeiling}`, value: params.pooler.backendCeiling }
    },
    {
      title: "client connections (peak per second)",
      lines: runs.map((r) => ({ name: r.name, values: r.outcome.series.clientConnections })),
      rule: { label: `client limit ${params.pooler.maxClientConnections}`, value: params.pooler.maxClientConnections }
    }
  ])

const writeFile = Effect.fnUntraced(function*(path: string, content: string) {
  const fs = yield* FileSystem.FileSystem
  yield* fs.writeFileString(path, content)
  yield* Console.log(`wrote ${path}`)
})

const runCommand = Command.make(
  "run",
  {
    scenario,
    policy: Flag.Literals("policy", Model.policies).pipe(
      Flag.withDescription("baseline | jitter-only | failfast-only | fixed | adaptive"),
      Flag.withDefault("baseline" as Model.Policy)
    ),
    seed,
    initialInterval,
    json,
    chart,
    overrides: overrideFlags
  },
  Effect.fn(function*(input) {
    const { chart, json, overrides, policy, scenario, seed } = input
    const params = yield* Options.apply(
      { ...Model.preset(scenario, policy, seed), initialInterval: input.initialInterval },
      overrideValues(overrides)
    )
    yield* Console.log(describe(params, scenario))
    const { outcome, summary } = yield* simulate(params, `${scenario}/${policy}`)
    yield* Console.log(`\n${Report.summaryTable([{ name: policy, summary }])}`)
    if (Option.isSome(json)) yield* writeFile(json.value, JSON.stringify(Report.document(outcome, summary)))
    if (Option.isSome(chart)) {
      yield* writeFile(chart.value, yield* chartOf(`${scenario} — ${policy}`, params, [{ name: policy, outcome }]))
    }
  })
).pipe(Command.withDescription("Simulate one scenario under one policy"))

const parsePolicies = (text: string): Effect.Effect<ReadonlyArray<Model.Policy>, Options.InvalidOption> => {
  const names = text.split(",").map((v) => v.trim())
  const known = (name: string): name is Model.Policy => (Model.policies as ReadonlyArray<string>).includes(name)
  return names.length > 0 && names.every(known)
    ? Effect.succeed(names as ReadonlyArray<Model.Policy>)
    : Effect.fail(
      Options.invalidOption("policies", text, `comma-separated policies among ${Model.policies.join(", ")}`)
    )
}

const policiesFlag = Flag.optional(
  Flag.String("policies").pipe(Flag.withDescription(
    `the policies to run side by side, comma-separated (choices: ${
      Model.policies.join(", ")
    }; compare: default every policy; sweep: overrides --policy)`
  ))
)

const compareCommand = Command.make(
  "compare",
  { scenario, seed, initialInterval, json, chart, policies: policiesFlag, overrides: overrideFlags },
  Effect.fn(function*(input) {
    const { chart, json, overrides, scenario, seed } = input
    const policies = Option.isSome(input.policies) ? yield* parsePolicies(input.policies.value) : Model.policies
    const runs: Array<{ name: string; outcome: Simulation.Outcome; summary: Summary.Summary }> = []
    let first: Model.Params | undefined
    for (const policy of policies) {
      const params = yield* Options.apply(
        { ...Model.preset(scenario, policy, seed), initialInterval: input.initialInterval },
        overrideValues(overrides)
      )
      if (first === undefined) {
        first = params
        yield* Console.log(describe(params, scenario))
      }
      if (policy === "adaptive") yield* Console.log(describeAdaptive(params).join("\n"))
      const { outcome, summary } = yield* simulate(params, `${scenario}/${policy}`)
      runs.push({ name: policy, outcome, summary })
    }
    yield* Console.log(`\n${Report.summaryTable(runs)}`)
    if (Option.isSome(json)) {
      yield* writeFile(
        json.value,
        JSON.stringify(Object.fromEntries(runs.map((r) => [r.name, Report.document(r.outcome, r.summary)])))
      )
    }
    if (Option.isSome(chart) && first !== undefined) {
      const ceiling = first.pooler.backendCeiling
      const panels = runs.flatMap((r): ReadonlyArray<Chart.Panel> => [
        {
          title: `${r.name}: active backends`,
          lines: [{ name: "active backends (peak/s)", values: r.outcome.series.activeBackends }],
          rule: { label: `ceiling ${ceiling}`, value: ceiling }
        },
        {
          title: `${r.name}: client connections`,
          lines: [{ name: "client connections (peak/s)", values: r.outcome.series.clientConnections }],
          rule: { label: `client limit ${first.pooler.maxClientConnections}`, value: first.pooler.maxClientConnections }
        }
      ])
      yield* writeFile(chart.value, yield* Chart.timeSeries(`${scenario}: the policies`, panels, { height: 110 }))
    }
  })
).pipe(Command.withDescription("Simulate one scenario under every policy, side by side"))

const list = (name: string, description: string, fallback: string) =>
  Flag.String(name).pipe(Flag.withDescription(`${description} (comma-separated)`), Flag.withDefault(fallback))

const parseList = (
  name: string,
  text: string
): Effect.Effect<ReadonlyArray<number>, InvalidParameter.InvalidParameter> => {
  const values = text.split(",").map((v) => Number(v.trim()))
  return values.length > 0 && values.every((v) => Number.isFinite(v) && v >= 0)
    ? Effect.succeed(values)
    : Effect.fail(Options.invalidOption(name, text, "comma-separated numbers >= 0"))
}

const axisTitle = (axis: Sweep.Axis): string => {
  switch (axis) {
    case "budget":
      return "retry budget (s)"
    case "ceiling":
      return "backend ceiling"
    case "api-rps":
      return "API requests/s"
    case "contention":
      return "database contention"
  }
}

const sweepCommand = Command.make(
  "sweep",
  {
    scenario,
    policy: Flag.Literals("policy", Model.policies).pipe(Flag.withDefault("baseline" as Model.Policy)),
    policies: policiesFlag,
    seed,
    fleets: list("fleets", "fleet sizes", "2000,4000,6000,8000,10000,11543"),
    axis: Flag.Literals("axis", Sweep.axes).pipe(
      Flag.withDescription("budget (retry budget, s) | ceiling (backends) | api-rps | contention"),
      Flag.withDefault("budget" as Sweep.Axis)
    ),
    values: list("values", "axis values", "0,2,5,10"),
    json,
    chart,
    overrides: overrideFlags
  },
  Effect.fn(function*(input) {
    const { axis, chart, json, overrides, scenario, seed } = input
    const fleets = yield* parseList("fleets", input.fleets)
    const values = yield* parseList("values", input.values)
    const policies = Option.isSome(input.policies) ? yield* parsePolicies(input.policies.value) : [input.policy]
    const results: Array<{ policy: Model.Policy; horizonSeconds: number; cells: ReadonlyArray<Sweep.Cell> }> = []
    for (const policy of policies) {
      const preset = Model.preset(scenario, policy, seed)
      const base = yield* Options.apply(
        { ...preset, horizonSeconds: Math.min(preset.horizonSeconds, 1800) },
        overrideValues(overrides)
      )
      yield* Console.log(`${describe(base, scenario)}\npolicy ${policy}`)
      const cells = yield* Effect.sync(() =>
        Sweep.run(base, fleets, axis, values, (cell, index, total) =>
          process.stderr.write(
            `sweep ${policy} ${index}/${total}: ${cell.derivers} derivers, ${axis} ${cell.value}: ${cell.outcome}\n`
          ))
      )
      results.push({ policy, horizonSeconds: base.horizonSeconds, cells })
      const header = ["derivers", ...values.map((v) => `${axis} ${v}`)]
      const rows = fleets.map((d) => [
        String(d),
        ...values.map((v) => {
          const cell = cells.find((c) => c.derivers === d && c.value === v)!
          return `${Report.recovery(cell.summary.recoverySeconds)} (${cell.summary.peakClientConnections})`
        })
      ])
      yield* Console.log(
        `\n${policy}: recovery after the trigger (peak client connections), ${base.horizonSeconds} s horizon:\n${
          Report.table(header, rows)
        }\n`
      )
    }
    if (Option.isSome(json)) {
      yield* writeFile(
        json.value,
        JSON.stringify(
          policies.length === 1
            ? { axis, fleets, values, cells: results[0]!.cells }
            : { axis, fleets, values, policies: results }
        )
      )
    }
    if (Option.isSome(chart)) {
      const horizon = results[0]!.horizonSeconds
      yield* writeFile(
        chart.value,
        yield* Chart.grid(
          `${scenario}/${policies.join(" vs ")}: recovery after the trigger (${horizon} s horizon)`,
          results.flatMap((r) =>
            r.cells.map((c) => ({
              x: String(c.value),
              y: String(c.derivers),
              outcome: c.outcome,
              label: Report.recovery(c.summary.recoverySeconds),
              column: r.policy
            }))
          ),
          { x: axisTitle(axis), y: "derivers" }
        )
      )
    }
  })
).pipe(
  Command.withDescription("Map the vulnerable region over fleet size × retry budget (or ceiling, API rate, contention)")
)

/**
 * The `simulate` command with its subcommands.
 *
 * @since 0.1.0
 */
export const command = Command.make("simulate").pipe(
  Command.withDescription("Fleet simulator: N derivers, one pooler, one Postgres"),
  Command.withSubcommands([runCommand, compareCommand, sweepCommand])
)
