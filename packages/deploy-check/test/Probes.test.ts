/**
 * The probes of the rendered manifests against the apps' real routes: with the database stopped (a closed port)
 * or saturated (every slot held), every liveness and startup probe must answer 200 and every readiness probe
 * 503. A liveness probe that touched the database would restart every pod of the fleet at once during an outage.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Effect, Schedule } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { byKind, config, type Manifest, render, repository, skipReason } from "./Rendered.ts"

const entries: Record<string, { readonly entry: string; readonly portVariable: string }> = {
  "resilience-api": { entry: "apps/api/src/main.ts", portVariable: "API_PORT" },
  "resilience-deriver": { entry: "apps/deriver/src/main.ts", portVariable: "DERIVER_METRICS_PORT" }
}

interface Probe {
  readonly deployment: string
  readonly kind: "startupProbe" | "livenessProbe" | "readinessProbe"
  readonly path: string
}

const probes = (manifests: ReadonlyArray<Manifest>): ReadonlyArray<Probe> =>
  byKind(manifests, "Deployment").flatMap((deployment) =>
    (["startupProbe", "livenessProbe", "readinessProbe"] as const).map((kind) => ({
      deployment: deployment.metadata.name,
      kind,
      path: deployment.spec.template.spec.containers[0][kind].httpGet.path
    }))
  )

/** Starts an app with the ConfigMap's environment (and the test's database and port); killed with the scope. */
const startApp = (deployment: string, env: Record<string, string>) =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const port = yield* Cluster.freePort
      const { entry, portVariable } = entries[deployment]!
      const child = spawn(process.execPath, ["--conditions=@resilience/source", `${repository}${entry}`], {
        env: { ...process.env, ...env, [portVariable]: String(port) },
        stdio: "ignore"
      })
      return { child, port }
    }),
    ({ child }) => Effect.sync(() => (child as ChildProcess).kill("SIGKILL"))
  )

/** The status of `GET path`, once the app listens (connection refused until then). */
const statusOf = (port: number, path: string) =>
  Effect.tryPromise(() => fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(5000) })).pipe(
    Effect.map((response) => response.status),
    Effect.retry({ times: 300, schedule: Schedule.spaced("100 millis") }),
    Effect.orDie
  )

const skip = skipReason()

describe.skipIf(skip !== undefined)(
  `probes against the apps' real routes${skip === undefined ? "" : ` (skipped: ${skip})`}`,
  () => {
    const manifests = skip === undefined ? render() : []
    const appEnv = (databaseUrl: string): Record<string, string> => ({
      ...config(manifests),
      DATABASE_URL: databaseUrl,
      API_ADMIN_TOKEN: "probe-test-admin-token",
      OTEL_SDK_DISABLED: "true",
      API_HOST: "127.0.0.1"
    })

    const expectDuringOutage = (databaseUrl: string, deployments: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        for (const deployment of deployments) {
          const { port } = yield* startApp(deployment, appEnv(databaseUrl))
          for (const probe of probes(manifests).filter((p) => p.deployment === deployment)) {
            const status = yield* statusOf(port, probe.path)
            const expected = probe.kind === "readinessProbe" ? 503 : 200
            assert.strictEqual(status, expected, `${deployment} ${probe.kind} ${probe.path} with the database down`)
          }
        }
      })

    it.live(
      "database stopped: liveness and startup 200, readiness 503 (API and deriver)",
      () =>
        Effect.gen(function*() {
          const closed = yield* Cluster.freePort
          yield* expectDuringOutage(`postgres://postgres:x@127.0.0.1:${closed}/postgres`, Object.keys(entries))
        }).pipe(Effect.scoped),
      120_000
    )

    it.live("database saturated: liveness and startup 200, readiness 503 (API)", () =>
      Effect.gen(function*() {
        const cluster = yield* Cluster.start({ maxConnections: 4 })
        const { refusal } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
        assert.strictEqual(refusal.code, "53300")
        yield* expectDuringOutage(cluster.url, ["resilience-api"])
      }).pipe(Effect.scoped), 120_000)
  }
)
