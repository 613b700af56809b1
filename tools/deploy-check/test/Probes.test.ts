/**
 * The probes of the rendered manifests against the apps' real routes: with the database stopped (a closed port)
 * or saturated (every slot held), every liveness and startup probe must answer 200 and every readiness probe
 * 503. A liveness probe that touched the database would restart every pod of the fleet at once during an outage.
 *
 * Issue #22: one API process serves both outages (it was a process each, ~2 s of CPU): its `DATABASE_URL` names a
 * port where nothing listens (stopped); then, once a cluster is saturated, a proxy (`CountingProxy`) listens there
 * (saturated), so the API reaches the server only when every slot is already held.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { CountingProxy } from "@resilience/test-db"
import { Context, Effect, Layer, Schedule } from "effect"
import { startApp } from "./Apps.ts"
import { byKind, config, type Manifest, render, skipReason } from "./Rendered.ts"

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

    /** Every probe of `deployment`, against the app on `port`, during the outage. */
    const expectDuringOutage = (deployment: string, port: number, outage: string) =>
      Effect.gen(function*() {
        for (const probe of probes(manifests).filter((p) => p.deployment === deployment)) {
          const status = yield* statusOf(port, probe.path)
          const expected = probe.kind === "readinessProbe" ? 503 : 200
          assert.strictEqual(status, expected, `${deployment} ${probe.kind} ${probe.path} with the database ${outage}`)
        }
      })

    /**
     * The API, for both outages: its `DATABASE_URL` names a port where nothing listens until the saturated test
     * forwards it to a saturated cluster (the password is the one every throw-away cluster gets).
     */
    class OutageApi extends Context.Service<OutageApi, { readonly port: number; readonly databasePort: number }>()(
      "test/OutageApi"
    ) {
      static readonly layer = Layer.effect(
        OutageApi,
        Effect.gen(function*() {
          const databasePort = yield* Cluster.freePort
          const { port } = yield* startApp(
            "resilience-api",
            appEnv(`postgres://postgres:test@127.0.0.1:${databasePort}/postgres`)
          )
          return { port, databasePort }
        })
      )
    }

    layer(OutageApi.layer, { excludeTestServices: true })((it) => {
      it.effect(
        "database stopped: liveness and startup 200, readiness 503 (API and deriver)",
        () =>
          Effect.gen(function*() {
            const api = yield* OutageApi
            yield* expectDuringOutage("resilience-api", api.port, "stopped")
            const closed = yield* Cluster.freePort
            const deriver = yield* startApp(
              "resilience-deriver",
              appEnv(`postgres://postgres:x@127.0.0.1:${closed}/postgres`)
            )
            yield* expectDuringOutage("resilience-deriver", deriver.port, "stopped")
          }).pipe(Effect.scoped),
        120_000
      )

      it.effect("database saturated: liveness and startup 200, readiness 503 (API)", () =>
        Effect.gen(function*() {
          const api = yield* OutageApi
          const cluster = yield* Cluster.start({ maxConnections: 4 })
          const { refusal } = yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
          assert.strictEqual(refusal.code, "53300")
          // the API's database port reaches the cluster only now, every slot held
          // the database "comes back" at the address the API already uses (a port taken since fails the test here)
          yield* CountingProxy.start(cluster, { port: api.databasePort })
          yield* expectDuringOutage("resilience-api", api.port, "saturated")
        }).pipe(Effect.scoped), 120_000)
    })
  }
)
