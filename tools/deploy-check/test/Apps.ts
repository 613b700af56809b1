/**
 * The apps as processes, started from their real entry points (`apps/api/src/main.ts`, `apps/deriver/src/main.ts`) with a given environment and
 * a free port; killed when the scope closes. What the probe and the dashboard tests run.
 */
import { Cluster } from "@resilience/local-postgres"
import { EntryPoint } from "@resilience/test-db"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { repository } from "./Rendered.ts"

/** Each Deployment's entry point and the variable that sets its HTTP port. */
export const entries: Record<string, { readonly entry: string; readonly portVariable: string }> = {
  "resilience-api": { entry: "apps/api/src/main.ts", portVariable: "API_PORT" },
  "resilience-deriver": { entry: "apps/deriver/src/main.ts", portVariable: "DERIVER_METRICS_PORT" }
}

/** A started app: its port and the last lines it wrote (stdout and stderr), for a failing assertion to show. */
export interface App {
  readonly port: number
  readonly output: () => string
}

/** Starts an app with `env` (plus its port); killed with the scope. */
export const startApp = (deployment: string, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const port = yield* Cluster.freePort
      const { entry, portVariable } = entries[deployment]!
      const child = spawn(process.execPath, ["--conditions=@resilience/source", `${repository}${entry}`], {
        env: { ...process.env, ...EntryPoint.compileCache, ...env, [portVariable]: String(port) },
        stdio: ["ignore", "pipe", "pipe"]
      })
      const lines: Array<string> = []
      const keep = (chunk: Buffer) => {
        lines.push(...chunk.toString().split("\n").filter((line) => line.length > 0))
        lines.splice(0, Math.max(0, lines.length - 40))
      }
      child.stdout.on("data", keep)
      child.stderr.on("data", keep)
      return { child, app: { port, output: () => lines.join("\n") } satisfies App }
    }),
    ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
  ).pipe(Effect.map(({ app }) => app))
