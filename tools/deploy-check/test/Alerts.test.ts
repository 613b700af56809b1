import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { parse } from "yaml"
import { declared } from "./DeclaredMetrics.ts"
import { repository } from "./Rendered.ts"

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
