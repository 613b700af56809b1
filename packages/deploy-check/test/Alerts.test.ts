import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { parse } from "yaml"
import { repository } from "./Rendered.ts"

/** Every metric name the packages and apps declare: the first argument of their counter/gauge/histogram calls. */
const declared = (): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const parent of ["packages", "apps"]) {
    for (const workspace of readdirSync(join(repository, parent))) {
      const src = join(repository, parent, workspace, "src")
      if (!existsSync(src)) continue
      const files = readdirSync(src, { recursive: true, withFileTypes: true }).filter((f) => f.name.endsWith(".ts"))
      for (const file of files) {
        const text = readFileSync(join(file.parentPath, file.name), "utf8")
        for (const match of text.matchAll(/(?:counter|gauge|histogram)\(\s*"([a-z_]+)"/g)) names.add(match[1]!)
      }
    }
  }
  return names
}

describe("deploy/prometheus/alerts.yaml", () => {
  it("names only metrics the apps export (histograms by their _bucket/_sum/_count series)", () => {
    const rules = parse(readFileSync(`${repository}deploy/prometheus/alerts.yaml`, "utf8")) as {
      groups: Array<{ rules: Array<{ alert: string; expr: string }> }>
    }
    const known = declared()
    assert.include([...known], "db_acquisitions_total", "the scan finds the declarations")
    const exprs = rules.groups.flatMap((group) => group.rules)
    assert.isAbove(exprs.length, 5)
    for (const { alert, expr } of exprs) {
      const metrics = [...expr.matchAll(/\b((?:db|deriver|api|admission)_[a-z_]+)\b/g)].map((m) => m[1]!)
      assert.isAbove(metrics.length, 0, alert)
      for (const metric of metrics) {
        assert.isTrue(
          known.has(metric.replace(/_(bucket|sum|count)$/, "")),
          `${alert}: ${metric} is not a metric of ours`
        )
      }
    }
  })
})
