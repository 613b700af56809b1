/**
 * `npm run failover -- [--fault switchover|primary-loss|all] [--sync on|off|both] [flags]`: each chosen
 * scenario on a fresh Patroni cluster, its table, and the side-by-side summary; `--json` keeps the results.
 * Exits non-zero when a scenario with `synchronous_mode` on has an anomaly, or any scenario has a 500 or a
 * process that exited.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Checker } from "@resilience/checker"
import { Console, Effect, FileSystem, Option, Random } from "effect"
import { Command, Flag } from "effect/cli"
import * as Report from "../Report.ts"
import * as Scenario from "../Scenario.ts"
import * as SystemPackages from "../SystemPackages.ts"

const d = Scenario.defaults
const num = (name: string, fallback: number, description: string) =>
  Flag.Finite(name).pipe(Flag.withDescription(description), Flag.withDefault(fallback))

const flags = {
  fault: Flag.Literals("fault", [...Scenario.faults, "all"] as const).pipe(
    Flag.withDescription(
      "switchover: patronictl switchover --force; primary-loss: kill -9 of the leader's postmaster; stall-then-loss: the standby stopped for --stall, then the leader killed; stall-cancel-promote: the same with a watchdog cancelling the commits waiting for the standby, then synchronous_mode turned off so that the standby takes over; all: the first two"
    ),
    Flag.withDefault("all" as const)
  ),
  sync: Flag.Literals("sync", ["on", "off", "both", "strict"] as const).pipe(
    Flag.withDescription("Patroni's synchronous_mode (strict: with synchronous_mode_strict)"),
    Flag.withDefault("both" as const)
  ),
  rate: num("rate", d.rate, "open-loop writes per second"),
  warmup: num("warmup", d.warmupSeconds, "seconds of traffic before the fault"),
  stall: num("stall", d.stallSeconds, "seconds stall-then-loss stops the standby before killing the leader"),
  after: num("after", d.afterSeconds, "seconds of traffic after the old primary has rejoined"),
  peers: num("peers", d.peers, "peers the messages are spread over"),
  sessions: num("sessions", d.sessions, "sessions the messages are spread over (0: one per write)"),
  seed: Flag.String("seed").pipe(
    Flag.withDescription("seed of the arrivals and the client's jitter"),
    Flag.withDefault("1")
  ),
  timeline: Flag.Boolean("timeline").pipe(
    Flag.withDescription("print the answers per second around the fault"),
    Flag.withDefault(false)
  ),
  verbose: Flag.Boolean("verbose").pipe(
    Flag.withDescription("print the API's and the deriver's output"),
    Flag.withDefault(false)
  ),
  json: Flag.optional(Flag.String("json").pipe(Flag.withDescription("write the results here")))
}

const log = (line: string) => Effect.runSync(Console.error(line))

const main = Command.make(
  "failover",
  flags,
  Effect.fn(function*(input) {
    const binaries = SystemPackages.find()
    if (binaries instanceof SystemPackages.SystemPackagesMissing) return yield* binaries
    const faults = input.fault === "all" ? (["switchover", "primary-loss"] as const) : [input.fault]
    const modes = input.sync === "both" ? [true, false] : [input.sync !== "off"]
    const results: Array<Scenario.Result> = []
    for (const fault of faults) {
      for (const synchronousMode of modes) {
        const settings: Scenario.Settings = {
          ...d,
          fault,
          synchronousMode,
          strict: input.sync === "strict",
          rate: input.rate,
          warmupSeconds: input.warmup,
          afterSeconds: input.after,
          stallSeconds: input.stall,
          peers: input.peers,
          sessions: input.sessions
        }
        yield* Console.error(`\n== ${Report.title(settings)} ==`)
        const result = yield* Scenario.run({ settings, binaries, log, verbose: input.verbose }).pipe(
          Random.withSeed(input.seed)
        )
        results.push(result)
        yield* Console.log(`\n${Report.scenario(result)}\n\n${Checker.table(result.verdict)}\n`)
        if (input.timeline) yield* Console.log(`answers per second from the fault:\n${Report.timeline(result)}\n`)
      }
    }
    yield* Console.log(`\n${Report.summary(results)}`)
    if (Option.isSome(input.json)) {
      const fs = yield* FileSystem.FileSystem
      yield* fs.writeFileString(input.json.value, JSON.stringify(results, null, 2))
    }
    const failed = results.filter((result) =>
      (result.settings.synchronousMode && !result.verdict.valid)
      || result.figures.internalErrors > 0
      || result.processesExited > 0
    )
    if (failed.length > 0) {
      return yield* Effect.fail(
        new Error(`failed: ${failed.map((result) => Report.title(result.settings)).join("; ")}`)
      )
    }
  })
).pipe(
  Command.withDescription("The failover lab: a real Patroni cluster under the API, the deriver and client traffic")
)

main.pipe(Command.run({ version: "0.1.0" }), Effect.provide(NodeServices.layer), NodeRuntime.runMain)
