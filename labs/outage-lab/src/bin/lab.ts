/**
 * `npm run lab -- <run|compare|calibrate|sweep|chart> [flags]`: the lab's command line (src/Cli.ts) on Node.js.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect } from "effect"
import { Command } from "effect/cli"
import * as Cli from "../Cli.ts"

Cli.command.pipe(Command.run({ version: Cli.version }), Effect.provide(NodeServices.layer), NodeRuntime.runMain)
