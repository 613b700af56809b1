/**
 * `npm run lab -- <run|compare|calibrate|sweep|chart> [flags]`: the lab's command line (src/Cli.ts) on Node.js.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { Command } from "effect/cli"
import * as Cli from "../Cli.ts"

Cli.command.pipe(Command.run({ version: Cli.version }), Effect.provide(NodeServices.layer), NodeRuntime.runMain)
