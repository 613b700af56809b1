/**
 * The deriver process of `bench/starved-host.ts` (not run by hand): one real deriver with the production
 * defaults (startup jitter off, so the run's start is not measured) on `BENCH_SCHEMA` at `DATABASE_URL`,
 * `DB_POOL_CLASS=null` (the spec's pool class), the overload signal's lag subtraction as `BENCH_SUBTRACT_LAG`
 * says (`false`: the behaviour before 0.3.0). Prints one JSON line per poll decision and per processed item on
 * stdout, `ready` once started; runs until SIGTERM.
 */
import { DbSession } from "@resilience/db-session"
import { SchemaName } from "@resilience/schema"
import { Effect, Logger } from "effect"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import * as LoopLag from "../src/internal/LoopLag.ts"

const url = process.env.DATABASE_URL!
const schema = SchemaName.makeUnsafe(process.env.BENCH_SCHEMA!)
const subtractLag = process.env.BENCH_SUBTRACT_LAG !== "false"
const line = (value: unknown) => Effect.sync(() => process.stdout.write(`${JSON.stringify(value)}\n`))

const program = Effect.scoped(Effect.gen(function*() {
  const defaults = yield* Effect.orDie(DeriverConfig.make({ pollingStartupJitterSeconds: 0 }))
  const config: DeriverConfig.DeriverConfig = { ...defaults, overload: { ...defaults.overload, subtractLag } }
  // a probe of its own, only to print the lag beside each poll (the deriver's is internal)
  const probe = yield* LoopLag.make()
  yield* Deriver.start({
    schema,
    config,
    handlers: Handlers.make({
      bench: (item) => line({ processed: item.payload, at: Date.now() })
    }),
    observer: (event) =>
      event._tag === "Polled"
        ? Effect.flatMap(probe.stalledMillis, (stalled) =>
          line({
            at: Date.now(),
            outcome: event.outcome,
            signal: event.signal,
            sleepMillis: Math.round(event.sleepMillis),
            intervalMillis: event.intervalMillis,
            floorMillis: Math.round(event.floorMillis),
            stalledMillis: Math.round(stalled)
          }))
        : Effect.void
  })
  yield* line("ready")
  return yield* Effect.never
})).pipe(
  Effect.provide(DbSession.layer({
    url,
    connectTimeout: "5 seconds",
    poolClass: "null",
    poolSize: 1,
    driver: "pg",
    applicationName: "bench-starved"
  }))
)

process.on("SIGTERM", () => process.exit(0))
Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
