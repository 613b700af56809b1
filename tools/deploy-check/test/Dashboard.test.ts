/**
 * deploy/grafana/resilience.json: its shape (schemaVersion, unique panel ids, every panel and target on
 * `${datasource}`) and every PromQL expression naming only metrics the apps declare in their sources
 * (DashboardScrape.test.ts checks the same against a scrape of the running apps).
 */
import { assert, describe, it } from "@effect/vitest"
import { dashboard, metricNames, unknownMetrics } from "./Dashboard.ts"
import { declared } from "./DeclaredMetrics.ts"

describe("deploy/grafana/resilience.json", () => {
  it("has a schemaVersion, unique panel ids, a $datasource variable and every panel on it", () => {
    assert.isAtLeast(dashboard.schemaVersion, 36)
    const ids = dashboard.panels.map((p) => p.id)
    assert.strictEqual(new Set(ids).size, ids.length, "unique panel ids")
    assert.include(dashboard.templating.list.map((v) => `${v.name}:${v.type}`), "datasource:datasource")
    for (const panel of dashboard.panels) {
      assert.strictEqual(panel.datasource?.uid, "${datasource}", `${panel.title}: datasource`)
      for (const target of panel.targets ?? []) {
        assert.strictEqual(target.datasource?.uid, "${datasource}", `${panel.title}: target datasource`)
      }
    }
  })

  it("names only metrics the apps export (postgres_exporter's excluded, by name)", () => {
    const known = declared()
    assert.include([...known], "db_acquisitions_total", "the scan finds the declarations")
    const graphs = dashboard.panels.filter((p) => p.type !== "row")
    assert.isAbove(graphs.length, 8)
    for (const panel of graphs) {
      assert.isAbove(panel.targets?.length ?? 0, 0, `${panel.title}: no targets`)
      for (const { expr } of panel.targets ?? []) {
        assert.isAbove(metricNames(expr).length, 0, `${panel.title}: ${expr} names no metric`)
      }
    }
    assert.deepStrictEqual(unknownMetrics(dashboard, known), [], "metrics the apps do not declare")
  })
})
