/**
 * The lab's command line, `lab <run|compare|calibrate|sweep|chart> [flags]`: one run, the policies side by side
 * with the simulator's runs of the same parameters, the pooler's measured costs, or a sweep of configurations.
 * Every flag is checked before anything starts. `src/bin/lab.ts` runs it (`npm run lab -- …`); tests run it in
 * their own process.
 */
import { type Model, Options } from "@resilience/fleet-sim"
import type { InvalidParameter } from "@resilience/parameters"
import { Console, Effect, FileSystem, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { loadavg } from "node:os"
import * as Calibration from "./Calibration.ts"
import * as Lab from "./Lab.ts"
import * as LabChart from "./LabChart.ts"
import * as LabReport from "./LabReport.ts"
import * as LabMap from "./Map.ts"
import * as Settings from "./Settings.ts"
import * as SimCompare from "./SimCompare.ts"
import type * as SimParams from "./SimParams.ts"
import * as Sweep from "./Sweep.ts"

const d = Settings.defaults
const num = (name: string, fallback: number, description: string) =>
  Flag.Finite(name).pipe(Flag.withDescription(description), Flag.withDefault(fallback))
const choice = <const A extends string>(name: string, choices: ReadonlyArray<A>, fallback: A, description: string) =>
  Flag.Literals(name, choices).pipe(Flag.withDescription(description), Flag.withDefault(fallback))

const settingFlags = {
  trigger: choice(
    "trigger",
    Settings.triggers,
    d.trigger,
    "stall: every pooled backend held for --stall-seconds; restart: the whole fleet at once"
  ),
  derivers: num("derivers", d.derivers, "real deriver loops, one schema each"),
  maxConnections: num("max-connections", d.maxConnections, "PostgreSQL max_connections"),
  maxClientConn: num("max-client-conn", d.maxClientConn, "PgBouncer max_client_conn (the client limit)"),
  poolSize: num("pool-size", d.poolSize, "PgBouncer default_pool_size (the backend ceiling)"),
  queryWaitTimeout: num("query-wait-timeout", d.queryWaitTimeoutSeconds, "PgBouncer query_wait_timeout, seconds"),
  auth: choice("auth", Settings.auths, d.auth, "PgBouncer auth_type for clients"),
  tls: choice(
    "tls",
    Settings.tlsModes,
    d.tls,
    "TLS for the pooler's clients (sslmode=require): none; pgbouncer (its client_tls_*); stunnel (stunnel4 in front of PgBouncer terminates it)"
  ),
  tlsKey: choice("tls-key", Settings.tlsKeys, d.tlsKey, "the key of the pooler's generated certificate"),
  poolerCpu: num("pooler-cpu", d.poolerCpu, "pin the pooler's processes to this CPU (taskset); -1: not pinned"),
  apiRps: num("api-rps", d.apiRps, "open-loop API requests per second through the pooler (0 = none)"),
  apiQueryMs: num("api-query-ms", d.apiQueryMillis, "what one API request holds its backend for, ms"),
  triggerAt: num("trigger-at", d.triggerAtSeconds, "seconds after the start when the trigger fires"),
  stallSeconds: num("stall-seconds", d.stallSeconds, "how long the stall holds every backend"),
  horizon: num("horizon", d.horizonSeconds, "the run stops by itself after this many seconds"),
  baseInterval: num("base-interval", d.baseIntervalSeconds, "DERIVER_POLLING_SLEEP_INTERVAL_SECONDS"),
  maxInterval: num("max-interval", d.maxIntervalSeconds, "DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS"),
  connectTimeout: num("connect-timeout", d.connectTimeoutSeconds, "DB_CONNECT_TIMEOUT_SECONDS (failfast policies)"),
  schemas: num("schemas", d.schemas, "schemas the derivers share (deriver i serves schema i mod N); 0: one each"),
  history: num(
    "history",
    d.history,
    "processed rows per schema's queue; > 0 also drops the partial claim index (each claim scans them)"
  ),
  claimTimeout: num("claim-timeout", d.claimTimeoutSeconds, "DERIVER_CLAIM_TIMEOUT_SECONDS (every policy)"),
  writes: Flag.Boolean("writes").pipe(
    Flag.withDescription(
      "API requests append domain messages, derived by schema 0's derivers; the run ends with the checker's verdict"
    ),
    Flag.withDefault(d.writes)
  )
}

type SettingInput = {
  readonly [K in keyof typeof settingFlags]: (typeof settingFlags)[K] extends Flag.Flag<infer A> ? A : never
}

const toSettings = (input: SettingInput, policy: Model.Policy): Settings.Settings => ({
  policy,
  trigger: input.trigger,
  derivers: input.derivers,
  maxConnections: input.maxConnections,
  maxClientConn: input.maxClientConn,
  poolSize: input.poolSize,
  queryWaitTimeoutSeconds: input.queryWaitTimeout,
  auth: input.auth,
  tls: input.tls,
  tlsKey: input.tlsKey,
  poolerCpu: input.poolerCpu,
  apiRps: input.apiRps,
  apiQueryMillis: input.apiQueryMs,
  triggerAtSeconds: input.triggerAt,
  stallSeconds: input.stallSeconds,
  horizonSeconds: input.horizon,
  baseIntervalSeconds: input.baseInterval,
  maxIntervalSeconds: input.maxInterval,
  connectTimeoutSeconds: input.connectTimeout,
  schemas: input.schemas,
  history: input.history,
  claimTimeoutSeconds: input.claimTimeout,
  writes: input.writes
})

const json = Flag.optional(
  Flag.String("json").pipe(Flag.withDescription("write settings, summary and per-second series here"))
)
const chart = Flag.optional(Flag.String("chart").pipe(Flag.withDescription("write an SVG chart here")))
const log = (line: string) => Console.error(line)

const describe = (s: Settings.Settings) =>
  `${s.derivers} derivers, max_connections ${s.maxConnections}, max_client_conn ${s.maxClientConn}, ` +
  `pool ${s.poolSize}, ${s.apiRps} API req/s × ${s.apiQueryMillis} ms, poll ${s.baseIntervalSeconds}→${s.maxIntervalSeconds} s, ` +
  `trigger ${s.trigger} at ${s.triggerAtSeconds} s${s.trigger === "stall" ? ` for ${s.stallSeconds} s` : ""}, ` +
  `horizon ${s.horizonSeconds} s, auth ${s.auth}, TLS ${Lab.tlsText(s)}${
    s.poolerCpu >= 0 ? ` (pooler on CPU ${s.poolerCpu})` : ""
  }, claim timeout ${s.claimTimeoutSeconds} s` +
  (s.history > 0 || s.schemas > 0
    ? `, ${Settings.schemaCount(s)} schemas × ${s.history} processed rows (no partial claim index)`
    : "") +
  (s.writes ? ", API requests append messages (checked)" : "")

const write = (path: Option.Option<string>, content: Effect.Effect<string>) =>
  Effect.gen(function*() {
    if (Option.isNone(path)) return
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(path.value, yield* content)
    yield* log(`wrote ${path.value}`)
  })

const run = Command.make(
  "run",
  {
    ...settingFlags,
    policy: Flag.Literals("policy", Settings.policies).pipe(Flag.withDefault("fixed" as Model.Policy)),
    json,
    chart
  },
  Effect.fn(function*(input) {
    const settings = yield* Settings.validate(toSettings(input, input.policy))
    yield* Console.log(`lab run, ${settings.policy}: ${describe(settings)}`)
    const result = yield* Lab.run(settings, log)
    yield* Console.log(`\n${LabReport.summaryTable([{ name: settings.policy, result }])}`)
    yield* Console.log(`failures by kind:\n${LabReport.failureLines([{ name: settings.policy, result }]) || "  none"}`)
    yield* write(input.json, Effect.succeed(JSON.stringify(LabReport.document(result))))
    yield* write(
      input.chart,
      LabChart.render(`outage lab: ${settings.policy}, ${settings.trigger}`, [{ name: settings.policy, lab: result }])
    )
  })
).pipe(Command.withDescription("One lab run under one policy"))

const samples = Flag.Int("calibration-samples").pipe(
  Flag.withDescription("connections of each kind the calibration measures (0: use the simulator's default costs)"),
  Flag.withDefault(2000),
  Flag.filter((n) => n === 0 || n >= 200, () => "--calibration-samples must be 0 or >= 200")
)

const calibrate = Command.make(
  "calibrate",
  {
    auth: settingFlags.auth,
    tls: settingFlags.tls,
    tlsKey: settingFlags.tlsKey,
    poolerCpu: settingFlags.poolerCpu,
    samples,
    json
  },
  Effect.fn(function*(input) {
    const settings = yield* Settings.validate({
      ...d,
      auth: input.auth,
      tls: input.tls,
      tlsKey: input.tlsKey,
      poolerCpu: input.poolerCpu
    })
    const calibration = yield* Calibration.measure({ ...settings, samples: Math.max(200, input.samples) })
    yield* Console.log(LabReport.calibrationTable(calibration, Calibration.simulatorDefaults))
    yield* write(input.json, Effect.succeed(JSON.stringify(calibration)))
  })
).pipe(Command.withDescription("Measure PgBouncer's cost per accepted and refused connection and per transaction"))

/** The policies named in `--policies`, each checked. */
const policiesOf = (input: SettingInput, list: string) =>
  Effect.forEach(
    list.split(",").map((p) => p.trim()),
    (name) => Effect.map(Settings.validate(toSettings(input, name as Model.Policy)), (s) => s.policy)
  )

/**
 * The simulator's costs for a pooler (auth method, TLS, pinning): measured here, or the simulator's defaults
 * with `samples` 0.
 */
const costsFor = (settings: Settings.Settings, samples: number) =>
  samples === 0
    ? Effect.succeed({ ...Calibration.simulatorDefaults, claimMillis: 1, measured: false })
    : Effect.map(Calibration.measure({ ...settings, samples }), (c) => ({ ...c, measured: true }))

/** What the calibration depends on: runs that share it share one calibration. */
const poolerKey = (s: Settings.Settings) => `${s.auth}/${s.tls}/${s.tlsKey}/${s.poolerCpu}`

const policiesFlag = Flag.String("policies").pipe(
  Flag.withDescription(
    `comma-separated policies, run one after another on fresh parts (choices: ${Settings.policies.join(", ")})`
  ),
  Flag.withDefault("baseline,fixed")
)

const compare = Command.make(
  "compare",
  {
    ...settingFlags,
    policies: policiesFlag,
    samples,
    json,
    chart
  },
  Effect.fn(function*(input) {
    const policies = yield* policiesOf(input, input.policies)
    const costs: SimParams.Costs & { readonly measured: boolean } = yield* costsFor(
      yield* Settings.validate(toSettings(input, policies[0]!)),
      input.samples
    )
    yield* Console.log(`lab compare: ${describe(toSettings(input, policies[0]!))}`)
    yield* Console.log(
      `simulator costs (${costs.measured ? "measured here" : "simulator defaults"}): connect ${
        (costs.connectCostMillis * 1000).toFixed(0)
      } µs, reject ${(costs.rejectCostMillis * 1000).toFixed(0)} µs, relay ${
        (costs.relayCostMillis * 1000).toFixed(0)
      } µs, claim ${costs.claimMillis.toFixed(2)} ms`
    )
    const runs: Array<{ name: string; lab: Lab.Result; sim: SimCompare.Simulated }> = []
    for (const policy of policies) {
      const settings = toSettings(input, policy)
      yield* log(`— ${policy} —`)
      const lab = yield* Lab.run(settings, log)
      const sim = yield* SimCompare.simulate(lab, costs)
      runs.push({ name: policy, lab, sim })
    }
    yield* Console.log(`\nlab:\n${LabReport.summaryTable(runs.map((r) => ({ name: r.name, result: r.lab })))}`)
    yield* Console.log(
      `failures by kind:\n${LabReport.failureLines(runs.map((r) => ({ name: r.name, result: r.lab }))) || "  none"}`
    )
    yield* Console.log(`\nsimulator vs lab (same parameters):\n${SimCompare.table(runs)}`)
    yield* write(
      input.json,
      Effect.succeed(JSON.stringify({
        costs,
        runs: runs.map((r) => ({
          name: r.name,
          lab: LabReport.document(r.lab),
          sim: { params: r.sim.params, summary: r.sim.summary }
        }))
      }))
    )
    yield* write(input.chart, LabChart.render(`outage lab vs simulator: ${runs[0]!.lab.settings.trigger}`, runs))
  })
).pipe(Command.withDescription("The policies on real parts, one after another, each beside the simulator's run"))

const sweep = Command.make(
  "sweep",
  {
    ...settingFlags,
    policies: policiesFlag,
    configs: Flag.String("configs").pipe(
      Flag.withDescription(
        "configurations separated by ';', each flag=value pairs over the other flags, e.g. 'api-rps=100;api-rps=200,auth=scram-sha-256'"
      )
    ),
    samples,
    json
  },
  Effect.fn(function*(input) {
    const policies = yield* policiesOf(input, input.policies)
    const configurations = input.configs.split(";").map((c) => c.trim()).filter((c) => c.length > 0)
    const planned = yield* Effect.forEach(configurations, (configuration) =>
      Effect.map(
        Settings.withConfiguration(toSettings(input, policies[0]!), configuration),
        (settings) => ({ configuration, settings })
      ))
    yield* Console.log(`lab sweep over: ${describe(toSettings(input, policies[0]!))}`)
    const costs = new Map<string, SimParams.Costs>()
    const cells: Array<Sweep.Cell> = []
    for (const { configuration, settings } of planned) {
      const key = poolerKey(settings)
      if (!costs.has(key)) costs.set(key, yield* costsFor(settings, input.samples))
      for (const policy of policies) {
        yield* log(`— ${configuration} / ${policy} —`)
        const lab = yield* Lab.run({ ...settings, policy }, log)
        const sim = yield* SimCompare.simulate(lab, costs.get(key)!)
        cells.push({
          configuration,
          policy,
          lab,
          sim,
          labOutcome: yield* Sweep.classify(lab),
          simOutcome: Sweep.classifySimulated(sim)
        })
        yield* Console.log(
          `${configuration} / ${policy}: lab back to pre-trigger peak ${
            lab.lab.settledSeconds ?? "never"
          } s, at the limit ${lab.lab.secondsAtClientLimitAfter} s after; recovery ${
            lab.summary.recoverySeconds ?? "never"
          } s, peak ${lab.summary.peakClientConnections} clients; ` +
            `sim ${sim.summary.recoverySeconds ?? "never"} s, peak ${sim.summary.peakClientConnections}`
        )
      }
    }
    yield* Console.log(
      `\nafter the trigger, lab: back to the pre-trigger peak of clients, seconds at the client limit / recovery by the simulator's rule (peak clients; ! = at the client limit); simulator: recovery (peak clients)\n${
        Sweep.table(cells)
      }`
    )
    yield* write(
      input.json,
      Effect.succeed(JSON.stringify({
        costs: Object.fromEntries(costs),
        cells: cells.map((c) => ({
          configuration: c.configuration,
          policy: c.policy,
          labOutcome: c.labOutcome,
          simOutcome: c.simOutcome,
          lab: LabReport.document(c.lab),
          sim: { summary: c.sim.summary }
        }))
      }))
    )
  })
).pipe(Command.withDescription("Configurations × policies on real parts, each beside the simulator"))

/** A comma-separated list of numbers, each checked. */
const numbers = (flag: string, text: string, ok: (n: number) => boolean, allowed: string) =>
  Effect.forEach(text.split(",").map((v) => v.trim()).filter((v) => v.length > 0), (value) => {
    const n = Number(value)
    return Number.isFinite(n) && ok(n) ? Effect.succeed(n) : Effect.fail(Options.invalidOption(flag, value, allowed))
  })

const mapCommand = Command.make(
  "map",
  {
    ...settingFlags,
    policies: policiesFlag,
    stalls: Flag.String("stalls").pipe(
      Flag.withDescription("trigger sizes: stall durations in seconds, comma-separated"),
      Flag.withDefault("5,10,20,40")
    ),
    loads: Flag.String("loads").pipe(
      Flag.withDescription("offered loads: API requests per second, comma-separated"),
      Flag.withDefault("50,100,200,300")
    ),
    observe: num(
      "observe",
      45,
      "seconds each cell runs after its stall ends (the horizon is trigger-at + stall + this)"
    ),
    othersWhereCollapsed: Flag.Boolean("others-where-collapsed").pipe(
      Flag.withDescription(
        "run the policies after the first only on the cells where the first stayed collapsed (lab or simulator)"
      ),
      Flag.withDefault(false)
    ),
    samples,
    json,
    chart
  },
  Effect.fn(function*(input) {
    const policies = yield* policiesOf(input, input.policies)
    const stalls = yield* numbers("stalls", input.stalls, (n) => n > 0, "numbers > 0, comma-separated")
    const loads = yield* numbers(
      "loads",
      input.loads,
      (n) => n >= 0 && n <= 2000,
      "numbers in [0, 2000], comma-separated"
    )
    const base = toSettings(input, policies[0]!)
    const planned = yield* Effect.forEach(
      stalls.flatMap((stall) => loads.map((load) => ({ stall, load }))),
      (cell) =>
        Effect.map(
          Settings.validate({
            ...base,
            stallSeconds: cell.stall,
            apiRps: cell.load,
            horizonSeconds: Math.ceil(base.triggerAtSeconds + cell.stall + input.observe)
          }),
          (settings) => ({ ...cell, settings })
        )
    )
    const costs = yield* costsFor(yield* Settings.validate(base), input.samples)
    yield* Console.log(`lab map over: ${describe(base)}`)
    yield* Console.log(
      `stalls ${stalls.join(", ")} s × loads ${
        loads.join(", ")
      } req/s; each cell observed ${input.observe} s after its stall; ` +
        `simulator costs (${costs.measured ? "measured here" : "simulator defaults"}): connect ${
          (costs.connectCostMillis * 1000).toFixed(0)
        } µs, reject ${(costs.rejectCostMillis * 1000).toFixed(0)} µs`
    )
    const cells: Array<LabMap.Cell> = []
    const total = planned.length * policies.length
    for (const [index, policy] of policies.entries()) {
      for (const { stall, load, settings } of planned) {
        const cellSettings = { ...settings, policy }
        const sim = yield* LabMap.predict(cellSettings, costs)
        const first = cells.find((c) => c.stallSeconds === stall && c.apiRps === load && c.policy === policies[0])
        const skip = index > 0 && input.othersWhereCollapsed && first !== undefined &&
          first.lab?.outcome !== "collapsed" && first.sim.outcome !== "collapsed"
        const startLoad = loadavg()[0]!
        const started = Date.now()
        const lab = skip ? null : yield* Lab.run(cellSettings, () => Effect.void)
        const cell: LabMap.Cell = {
          stallSeconds: stall,
          apiRps: load,
          policy,
          lab: lab === null ? null : LabMap.judgeLab(lab),
          sim: sim.verdict,
          wallSeconds: lab === null ? 0 : Math.round((Date.now() - started) / 1000),
          load: [startLoad, loadavg()[0]!],
          poolerCpuSeconds: lab?.lab.poolerCpuSeconds ?? 0,
          sampleRate: lab?.lab.sampleRate ?? 0
        }
        cells.push(cell)
        yield* log(
          `[${cells.length}/${total}] stall ${stall} s, ${load} req/s, ${policy}: lab ${LabMap.verdictText(cell.lab)}${
            cell.lab === null
              ? " (not run)"
              : ` (saturated ${cell.lab.saturatedAfter} s after, ${cell.lab.refusalsAfter} refusals after, goodput ${
                cell.lab.goodputAfter.toFixed(1)
              }/s, pooler CPU ${cell.poolerCpuSeconds.toFixed(1)} s, ${
                cell.sampleRate.toFixed(1)
              } Hz, ${cell.wallSeconds} s wall)`
          }; sim ${LabMap.verdictText(cell.sim)}; load ${cell.load.map((n) => n.toFixed(2)).join(" → ")}`
        )
      }
    }
    yield* Console.log(
      `\n${LabMap.legend}\n${LabMap.table(cells)}`
    )
    yield* write(
      input.json,
      Effect.succeed(JSON.stringify({ settings: base, costs, observeSeconds: input.observe, cells }))
    )
    yield* write(input.chart, LabMap.chart(`outage lab map: ${describe(base)}`, cells))
  })
).pipe(
  Command.withDescription("Trigger size × offered load on real parts, each cell beside the simulator's prediction")
)

const chartCommand = Command.make(
  "chart",
  {
    from: Flag.String("from").pipe(Flag.withDescription("a --json document of sweep or of map")),
    configuration: Flag.String("configuration").pipe(
      Flag.withDescription("the sweep configuration to draw (not for a map)"),
      Flag.withDefault("")
    ),
    out: Flag.String("out").pipe(Flag.withDescription("the SVG to write"))
  },
  Effect.fn(function*(input) {
    const fs = yield* FileSystem.FileSystem
    const document = JSON.parse(yield* fs.readFileString(input.from)) as {
      readonly settings?: Settings.Settings
      readonly cells: ReadonlyArray<{
        readonly configuration: string
        readonly policy: string
        readonly lab: Parameters<typeof LabChart.fromDocument>[0]
      }>
    }
    if (document.settings !== undefined) {
      // a map's document: its cells judged again by today's rule from what they recorded, the table and the chart
      const observe = (document as unknown as { readonly observeSeconds: number }).observeSeconds
      const cells = (document.cells as unknown as ReadonlyArray<LabMap.Cell>).map((c) => ({
        ...c,
        lab: c.lab === null ? null : LabMap.rejudge(c.lab, observe),
        sim: LabMap.rejudge(c.sim, observe)
      }))
      yield* Console.log(`${LabMap.legend}\n${LabMap.table(cells)}`)
      return yield* write(
        Option.some(input.out),
        LabMap.chart(`outage lab map: ${describe(document.settings)}`, cells)
      )
    }
    const cells = document.cells.filter((c) => c.configuration === input.configuration)
    if (cells.length === 0) {
      return yield* Effect.fail(
        new Error(
          `--configuration: ${input.configuration} is not one of ${
            [...new Set(document.cells.map((c) => c.configuration))].join("; ")
          }`
        )
      )
    }
    yield* write(
      Option.some(input.out),
      LabChart.render(
        `outage lab: ${input.configuration}`,
        cells.map((c) => ({ name: c.policy, lab: LabChart.fromDocument(c.lab) }))
      )
    )
  })
).pipe(Command.withDescription("Draw one configuration of a sweep's --json document, or a map's"))

/** The `lab` command and its subcommands. */
export const command = Command.make("lab").pipe(
  Command.withDescription("The outage lab: real PostgreSQL, PgBouncer and deriver loops through an incident"),
  Command.withSubcommands([run, compare, calibrate, sweep, mapCommand, chartCommand])
)

/** What the command fails with when a flag's value is out of its range (it names the flag). */
export type FlagError = InvalidParameter.InvalidParameter

/** What `--version` prints. */
export const version = "0.1.0"
