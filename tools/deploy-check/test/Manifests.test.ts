import { assert, describe, it } from "@effect/vitest"
import { validate } from "dockerfile-utils"
import { Deployment } from "kubernetes-models/apps/v1"
import { Job } from "kubernetes-models/batch/v1"
import { PodDisruptionBudget } from "kubernetes-models/policy/v1"
import { ConfigMap, Secret, Service } from "kubernetes-models/v1"
import { readFileSync } from "node:fs"
import { byKind, config, type Manifest, one, render, repository, skipReason } from "./Rendered.ts"

const models: Record<string, new(data: never) => { validate(): void }> = {
  "apps/v1/Deployment": Deployment,
  "batch/v1/Job": Job,
  "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "v1/ConfigMap": ConfigMap,
  "v1/Secret": Secret,
  "v1/Service": Service
}

const container = (manifest: Manifest) => manifest.spec.template.spec.containers[0]
const skip = skipReason()

describe.skipIf(skip !== undefined)(
  `the example tenant's manifests${skip === undefined ? "" : ` (skipped: ${skip})`}`,
  () => {
    const manifests = skip === undefined ? render() : []

    it("are valid against the Kubernetes API schemas (types, required fields, enums)", () => {
      assert.deepStrictEqual(
        manifests.map((m) => m.kind).sort(),
        [
          "ConfigMap",
          "Deployment",
          "Deployment",
          "Job",
          "PodDisruptionBudget",
          "PodDisruptionBudget",
          "Secret",
          "Service",
          "Service"
        ]
      )
      for (const manifest of manifests) {
        const Model = models[`${manifest.apiVersion}/${manifest.kind}`]
        assert.isDefined(Model, `${manifest.apiVersion} ${manifest.kind} has a schema here`)
        assert.doesNotThrow(() => new Model!(manifest as never).validate(), undefined, manifest.metadata.name)
      }
    })

    it("take every DB_*/API_*/DERIVER_*/OTEL_* setting from the ConfigMap and the Secret", () => {
      const configMap = one(manifests, "ConfigMap", "resilience-config").metadata.name
      const secret = one(manifests, "Secret", "resilience-secrets").metadata.name
      assert.containsAllKeys(one(manifests, "Secret", "resilience-secrets").data, ["DATABASE_URL", "API_ADMIN_TOKEN"])
      for (const manifest of [...byKind(manifests, "Deployment"), ...byKind(manifests, "Job")]) {
        assert.deepStrictEqual(container(manifest).envFrom, [
          { configMapRef: { name: configMap } },
          { secretRef: { name: secret } }
        ], manifest.metadata.name)
      }
      assert.strictEqual(config(manifests)["DB_SCHEMA"], "tenant_acme")
      assert.strictEqual(config(manifests)["API_MIGRATE"], "false", "the Job migrates, the apps wait for the schema")
    })

    it("probe liveness on /healthz and readiness on /readyz, on the port the app listens on", () => {
      const env = config(manifests)
      const ports: Record<string, string> = {
        "resilience-api": env["API_PORT"]!,
        "resilience-deriver": env["DERIVER_METRICS_PORT"]!
      }
      for (const deployment of byKind(manifests, "Deployment")) {
        const c = container(deployment)
        const named = Object.fromEntries(
          c.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort])
        )
        for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
          assert.strictEqual(
            String(named[c[probe].httpGet.port]),
            ports[deployment.metadata.name],
            `${deployment.metadata.name} ${probe}`
          )
        }
        assert.strictEqual(c.livenessProbe.httpGet.path, "/healthz")
        assert.strictEqual(c.startupProbe.httpGet.path, "/healthz")
        assert.strictEqual(c.readinessProbe.httpGet.path, "/readyz")
        const annotations = deployment.spec.template.metadata.annotations
        assert.strictEqual(annotations["prometheus.io/scrape"], "true")
        assert.strictEqual(annotations["prometheus.io/port"], ports[deployment.metadata.name])
        assert.strictEqual(annotations["prometheus.io/path"], "/metrics")
        assert.isDefined(c.resources.requests.cpu)
        assert.isDefined(c.resources.limits.memory)
        assert.isTrue(deployment.spec.template.spec.securityContext.runAsNonRoot)
      }
    })

    it("let the API reach its deriver's POST /wake through the deriver's Service, on the port the deriver listens on", () => {
      const env = config(manifests)
      const service = one(manifests, "Service", "resilience-deriver")
      const deployment = one(manifests, "Deployment", "resilience-deriver")
      const wake = new URL(env["API_WAKE_URL"]!)
      assert.strictEqual(wake.hostname, service.metadata.name, "the URL names the deriver's Service")
      assert.strictEqual(wake.pathname, "/wake")
      const port = service.spec.ports.find((p: { port: number }) => String(p.port) === wake.port)
      assert.isDefined(port, `the Service serves port ${wake.port}`)
      const named = Object.fromEntries(
        container(deployment).ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort])
      )
      assert.strictEqual(String(named[port.targetPort]), env["DERIVER_METRICS_PORT"], "it reaches the metrics port")
      assert.deepStrictEqual(service.spec.selector, deployment.spec.selector.matchLabels)
    })

    it("give the deriver a grace period above its shutdown grace, and the API a preStop within its own", () => {
      const grace = Number(config(manifests)["DERIVER_SHUTDOWN_GRACE_SECONDS"])
      const deriver = one(manifests, "Deployment", "resilience-deriver").spec.template.spec
      // the shutdown grace, then one checkout to release the claims: bounded by the connect and statement timeouts
      const release = Number(config(manifests)["DB_CONNECT_TIMEOUT_SECONDS"]) +
        Number(config(manifests)["DB_STATEMENT_TIMEOUT_SECONDS"])
      assert.isAbove(deriver.terminationGracePeriodSeconds, grace + release)
      const api = one(manifests, "Deployment", "resilience-api").spec.template.spec
      const preStop = Number(api.containers[0].lifecycle.preStop.exec.command[1])
      assert.isAbove(
        api.terminationGracePeriodSeconds,
        preStop + Number(config(manifests)["DB_STATEMENT_TIMEOUT_SECONDS"])
      )
    })

    it("roll one pod at a time, never below the replicas, and let a drain take one at a time", () => {
      for (const deployment of byKind(manifests, "Deployment")) {
        assert.deepStrictEqual(deployment.spec.strategy, {
          type: "RollingUpdate",
          rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }
        }, deployment.metadata.name)
        assert.isAtLeast(deployment.spec.minReadySeconds, 5)
        const budget = one(manifests, "PodDisruptionBudget", deployment.metadata.name)
        assert.deepStrictEqual(budget.spec.selector.matchLabels, deployment.spec.selector.matchLabels)
        assert.strictEqual(budget.spec.maxUnavailable, 1)
      }
    })

    it("run migrate as a Job: 75 is retried, 78 and 1 fail the Job at once", () => {
      const job = one(manifests, "Job", "resilience-migrate")
      assert.deepStrictEqual(container(job).args, ["migrate"])
      assert.strictEqual(job.spec.template.spec.restartPolicy, "Never")
      const rules = job.spec.podFailurePolicy.rules as ReadonlyArray<
        { action: string; onExitCodes?: { values: Array<number> } }
      >
      const actionFor = (code: number) => rules.find((rule) => rule.onExitCodes?.values.includes(code))?.action
      assert.strictEqual(actionFor(75), "Count")
      assert.strictEqual(actionFor(78), "FailJob")
      assert.strictEqual(actionFor(1), "FailJob")
      assert.isAbove(job.spec.backoffLimit, 0)
    })
  }
)

describe("deploy/Dockerfile", () => {
  it("passes dockerfile-utils' lint with no diagnostics", () => {
    const diagnostics = validate(readFileSync(`${repository}deploy/Dockerfile`, "utf8"))
    assert.deepStrictEqual(diagnostics.map((d) => d.message), [])
  })
})
