/**
 * `npm run monitor -- --database-url postgres://… [--interval 1] [--duration 60]`
 *
 * Prints, once per interval, the active backends and connections per application_name, as the peak of
 * 10 Hz samples of pg_stat_activity.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Console, Effect, Option, Redacted } from "effect"
import { Command, Flag } from "effect/cli"
import * as Monitor from "../Monitor.ts"

const command = Command.make(
  "monitor",
  {
    databaseUrl: Flag.Redacted("database-url").pipe(
      Flag.withDescription("connection string (a role that may read pg_stat_activity)")
    ),
    interval: Flag.Finite("interval").pipe(Flag.withDescription("seconds per printed line"), Flag.withDefault(1)),
    duration: Flag.optional(Flag.Finite("duration").pipe(Flag.withDescription("stop after this many seconds")))
  },
  Effect.fn(function*(input) {
    yield* Console.log("time      application                         active  conns  (peak of 10 Hz samples)")
    const run = Monitor.run(Redacted.value(input.databaseUrl), input.interval * 1000, (line) => Console.log(line))
    yield* Option.isSome(input.duration) ? Effect.timeoutOption(run, `${input.duration.value} seconds`) : run
  }, Effect.scoped)
).pipe(Command.withDescription("Active backends per second by application_name"))

command.pipe(Command.run({ version: "0.1.0" }), Effect.provide(NodeServices.layer), NodeRuntime.runMain)
