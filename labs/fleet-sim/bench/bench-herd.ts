/**
 * `npm run bench:herd -- [--derivers 300] [--max-connections 100] [--phase-seconds 25] [--json F] [--chart F]`
 *
 * Starts a dedicated PostgreSQL (embedded binaries, `max_connections` as given), creates one schema per
 * deriver, then runs the fleet twice from the same instant: jitter off, then jitter on.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cluster } from "@resilience/local-postgres"
import { Console, Effect, FileSystem, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import * as ActivitySampler from "../src/ActivitySampler.ts"
import * as Chart from "../src/Chart.ts"
import * as Report from "../src/Report.ts"
import * as HerdBench from "./HerdBench.ts"

const int = (name: string, fallback: number, description: string) =>
  Flag.Int(name).pipe(
    Flag.withDescription(description),
    Flag.withDefault(fallback),
    Flag.filter((n) => n >= 1, () => `--${name} must be >= 1`)
  )
const finite = (name: string, fallback: number, description: string) =>
  Flag.Finite(name).pipe(
    Flag.withDescription(description),
    Flag.withDefault(fallback),
    Flag.filter((n) => n > 0, () => `--${name} must be > 0`)
  )

const command = Command.make(
  "bench-herd",
  {
    derivers: int("derivers", 300, "real deriver loops, one schema each"),
    maxConnections: int("max-connections", 100, "the cluster's max_connections (the backend ceiling)"),
    phaseSeconds: finite("phase-seconds", 25, "seconds per phase (jitter off, then on)"),
    baseInterval: finite("base-interval", 0.25, "DERIVER_POLLING_SLEEP_INTERVAL_SECONDS"),
    maxInterval: finite("max-interval", 2, "DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS (and the startup window)"),
    jitterRatio: finite("jitter-ratio", 0.5, "DERIVER_POLLING_JITTER_RATIO of the jittered phase"),
    connectTimeout: finite("connect-timeout", 2, "DB_CONNECT_TIMEOUT_SECONDS"),
    json: Flag.optional(Flag.String("json")),
    chart: Flag.optional(Flag.String("chart"))
  },
  Effect.fn(function*(input) {
    const cluster = yield* Cluster.start({ maxConnections: input.maxConnections })
    const options: HerdBench.Options = {
      url: cluster.url,
      derivers: input.derivers,
      phaseSeconds: input.phaseSeconds,
      baseIntervalSeconds: input.baseInterval,
      maxIntervalSeconds: input.maxInterval,
      jitterRatio: input.jitterRatio,
      connectTimeoutSeconds: input.connectTimeout,
      samplePeriodMillis: 100
    }
    yield* Console.log(
      `PostgreSQL on port ${cluster.port}, max_connections=${input.maxConnections}; ${input.derivers} derivers, ` +
        `poll ${input.baseInterval}→${input.maxInterval} s, ${input.phaseSeconds} s per phase, sampler at 10 Hz`
    )
    yield* Console.log(`creating ${input.derivers} schemas…`)
    yield* HerdBench.prepare(options)
    const client = yield* ActivitySampler.connect(cluster.url)
    const off = yield* HerdBench.phase(options, false, client)
    yield* Effect.sleep("3 seconds")
    const on = yield* HerdBench.phase(options, true, client)
    const rows: Array<[string, (p: HerdBench.Phase) => string]> = [
      ["peak concurrent claims", (p) => String(p.claimsPeak)],
      ["mean concurrent claims", (p) => Stats.fixed(p.claimsMean, 2)],
      ["peak connections", (p) => String(p.connectionsPeak)],
      ["mean connections", (p) => Stats.fixed(p.connectionsMean, 2)],
      ["polls", (p) => String(p.polls)],
      ["connection errors (failed polls)", (p) => String(p.connectionErrors)],
      ["samples", (p) => String(p.samples.length)]
    ]
    yield* Console.log(
      `\n${Report.table(["", off.name, on.name], rows.map(([label, f]) => [label, f(off), f(on)]))}`
    )
    const ratio = (a: number, b: number) => b === 0 ? "∞" : (a / b).toFixed(1)
    yield* Console.log(
      `\nratio off/on: peak claims ${ratio(off.claimsPeak, on.claimsPeak)}×, peak connections ${
        ratio(off.connectionsPeak, on.connectionsPeak)
      }×, connection errors ${off.connectionErrors} vs ${on.connectionErrors}`
    )
    const fs = yield* FileSystem.FileSystem
    if (Option.isSome(input.json)) {
      yield* fs.writeFileString(
        input.json.value,
        JSON.stringify({ options: { ...options, url: undefined }, phases: [off, on] })
      )
      yield* Console.log(`wrote ${input.json.value}`)
    }
    if (Option.isSome(input.chart)) {
      const bins = (p: HerdBench.Phase, field: "claims" | "connections") => {
        const values = new Float64Array(Math.ceil(input.phaseSeconds * 10))
        for (const s of p.samples) {
          const i = Math.min(values.length - 1, Math.floor(s.second * 10))
          values[i] = Math.max(values[i]!, s[field])
        }
        return values
      }
      const svg = yield* Chart.timeSeries(
        `herd benchmark: ${input.derivers} real derivers started at once (max_connections ${input.maxConnections})`,
        [
          {
            title: "active claim queries (10 Hz)",
            lines: [{ name: off.name, values: bins(off, "claims") }, { name: on.name, values: bins(on, "claims") }]
          },
          {
            title: "connections (10 Hz)",
            lines: [{ name: off.name, values: bins(off, "connections") }, {
              name: on.name,
              values: bins(on, "connections")
            }],
            rule: { label: `max_connections ${input.maxConnections}`, value: input.maxConnections }
          }
        ],
        { step: 0.1, unit: "seconds" }
      )
      yield* fs.writeFileString(input.chart.value, svg)
      yield* Console.log(`wrote ${input.chart.value}`)
    }
  }, Effect.scoped)
).pipe(Command.withDescription("Real-cluster herd benchmark: jitter off vs on"))

command.pipe(Command.run({ version: "0.1.0" }), Effect.provide(NodeServices.layer), NodeRuntime.runMain)
