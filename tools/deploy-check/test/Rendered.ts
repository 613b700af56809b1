/**
 * The example tenant's manifests as `kubectl kustomize` renders them (what a cluster would receive), parsed.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { parseAllDocuments } from "yaml"

export const repository = new URL("../../../", import.meta.url).pathname
export const overlay = `${repository}deploy/k8s/overlays/example-tenant`

/** Why the manifest tests skip here (no kubectl), or undefined when they run; under CI=true they never skip. */
export const skipReason = (): string | undefined =>
  spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" }).status !== 0 && process.env["CI"] !== "true"
    ? "kubectl not found (Debian: apt-get install kubernetes-client); skipped outside CI"
    : undefined

/** A rendered Kubernetes object; its shape is the schema test's business, the other tests read fields by path. */
// oxlint-disable typescript/no-explicit-any
export type Manifest = {
  readonly apiVersion: string
  readonly kind: string
  readonly metadata: any
  readonly spec?: any
  readonly data?: any
}
// oxlint-enable typescript/no-explicit-any

export const render = (): ReadonlyArray<Manifest> =>
  parseAllDocuments(execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8" })).map((document) =>
    document.toJS() as Manifest
  )

export const byKind = (manifests: ReadonlyArray<Manifest>, kind: string): ReadonlyArray<Manifest> =>
  manifests.filter((manifest) => manifest.kind === kind)

export const one = (manifests: ReadonlyArray<Manifest>, kind: string, name: string): Manifest => {
  const found = manifests.find((manifest) => manifest.kind === kind && manifest.metadata.name.startsWith(name))
  if (found === undefined) throw new Error(`no ${kind} ${name} in the rendered manifests`)
  return found
}

/** The ConfigMap's data: the environment every container gets. */
export const config = (manifests: ReadonlyArray<Manifest>): Record<string, string> =>
  one(manifests, "ConfigMap", "resilience-config").data
