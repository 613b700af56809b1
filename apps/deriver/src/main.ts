/**
 * Entry point: `node --conditions=@resilience/source apps/deriver/src/main.ts`.
 *
 * @since 0.1.0
 */
import { NodeRuntime } from "@effect/platform-node"
import { Layer } from "effect"
import * as App from "./App.ts"

NodeRuntime.runMain(Layer.launch(App.layer))
