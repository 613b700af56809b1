/**
 * `npm run bench:wake -w @resilience/fleet-sim`: the figures of docs/results/fleet-sim.md's "The wake path".
 * The spec's fleet (11,543 derivers) in the `incident`, mass `restart` and `outage` scenarios, under the
 * `fixed` and `adaptive` policies, each with the wake off and on and the same writes (WAKE_WRITE_FRACTION of
 * the API's requests, default 0.1: 20 writes a second), seed 1; the wake's coalescing is the deriver's
 * (`Coalesce`, with its default minimum interval). WAKE_SCENARIOS (comma-separated), WAKE_SEED and
 * WAKE_SPREAD_AFTER_FAILURE_MS (the candidate `Model.Wake.spreadAfterFailureMillis`, 0 by default) select other
 * runs. Prints one markdown table. Simulated, so
 * it needs no database and stops by itself (about two minutes on the project's machine).
 */
import * as Model from "../src/Model.ts"
import * as Simulation from "../src/Simulation.ts"
import * as Summary from "../src/Summary.ts"

const writeFraction = Number(process.env.WAKE_WRITE_FRACTION ?? 0.1)
const scenarios = (process.env.WAKE_SCENARIOS ?? "incident,restart,outage").split(",") as ReadonlyArray<Model.Scenario>
const seed = process.env.WAKE_SEED ?? "1"
const spreadAfterFailureMillis = Number(process.env.WAKE_SPREAD_AFTER_FAILURE_MS ?? 0)
const policies: ReadonlyArray<Model.Policy> = ["fixed", "adaptive"]

const seconds = (value: number | null, digits = 1) => value === null ? "never" : `${value.toFixed(digits)} s`

const header = [
  "scenario",
  "policy",
  "wake",
  "peak active (after trigger)",
  "recovery",
  "s at ceiling",
  "settled max claim starts/s",
  "mean + 5·sqrt(mean)",
  "within",
  "writes",
  "wake polls (failed) / coalesced / held / ignored",
  "pickup p50 / p99",
  "all first 201s",
  "all processed (drain)"
]
const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`]
for (const scenario of scenarios) {
  for (const policy of policies) {
    for (const enabled of [false, true]) {
      const preset = Model.preset(scenario, policy, seed)
      const params: Model.Params = {
        ...preset,
        derivers: Model.incident.derivers,
        wake: { ...Model.noWake, enabled, writeFraction, spreadAfterFailureMillis }
      }
      const s = Summary.summarize(Simulation.run(params))
      lines.push(
        `| ${
          [
            `${scenario} (${params.horizonSeconds} s)`,
            policy,
            enabled ? "on" : "off",
            String(s.peakActiveAfterTrigger),
            s.recoverySeconds === null ? "never" : `${s.recoverySeconds} s`,
            String(s.secondsAtCeiling),
            String(s.settledMaxClaimStartsPerSecond),
            s.settledHerdBound.toFixed(1),
            s.settledMaxClaimStartsPerSecond <= s.settledHerdBound ? "yes" : "**no**",
            String(s.writes),
            `${s.wakePolls} (${s.wakePollsFailed}) / ${s.wakesCoalesced} / ${s.wakesHeld} / ${s.wakesIgnored}`,
            s.pickupP50Seconds === null ? "-" : `${seconds(s.pickupP50Seconds, 2)} / ${seconds(s.pickupP99Seconds, 2)}`,
            params.outage === undefined ? "-" : seconds(s.lastFirst201Seconds),
            params.outage === undefined ? "-" : seconds(s.drainSeconds)
          ].join(" | ")
        } |`
      )
      process.stderr.write(`${scenario} ${policy} wake ${enabled ? "on" : "off"}: ${s.wallSeconds.toFixed(1)} s wall\n`)
    }
  }
}
process.stdout.write(
  `writes: ${writeFraction} of the API's requests, seed ${seed}${
    spreadAfterFailureMillis > 0 ? `, candidate spread after a failure ${spreadAfterFailureMillis} ms` : ""
  }\n\n${lines.join("\n")}\n`
)
