/**
 * deploy/grafana/resilience.json: its shape (schemaVersion, unique panel ids, every panel and target on
 * `${datasource}`) and every PromQL expression naming only metrics the apps declare.
 */
import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { declared } from "./DeclaredMetrics.ts"
import { repository } from "./Rendered.ts"

/** Metrics of postgres_exporter, not of the apps: the panels naming them say so in their description. */
const exporterMetrics: ReadonlySet<string> = new Set(["pg_stat_activity_count"])

const functions = new Set([
  "sum",
  "max",
  "min",
  "avg",
  "count",
  "rate",
  "irate",
  "increase",
  "histogram_quantile",
  "by",
  "without",
  "on",
  "ignoring",
  "and",
  "or",
  "unless",
  "label_values",
  "clamp_min",
  "clamp_max",
  "topk",
  "bottomk",
  "delta",
  "deriv",
  "abs",
  "offset",
  "bool",
  "group_left",
  "group_right",
  "time",
  "vector",
  "scalar"
])

/** The metric names of a PromQL expression: identifiers not inside `{...}`, `(by ...)` lists, strings or `[...]`. */
export const metricNames = (expr: string): ReadonlyArray<string> => {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, "\"\"")
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "")
  return [...stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)]
    .map((m) => m[0])
    .filter((name) => !functions.has(name) && !/^\d/.test(name))
}

/** The base metric of a series name: a histogram's `_bucket`/`_sum`/`_count` series name their histogram. */
const base = (name: string, known: ReadonlySet<string>): string => {
  if (known.has(name)) return name
  const stem = name.replace(/_(bucket|sum|count)$/, "")
  return known.has(stem) ? stem : name
}

interface Panel {
  readonly id: number
  readonly title: string
  readonly type: string
  readonly datasource?: { readonly uid?: string }
  readonly targets?: ReadonlyArray<{ readonly expr: string; readonly datasource?: { readonly uid?: string } }>
}

const dashboard = JSON.parse(readFileSync(`${repository}deploy/grafana/resilience.json`, "utf8")) as {
  schemaVersion: number
  panels: ReadonlyArray<Panel>
  templating: { list: ReadonlyArray<{ name: string; type: string }> }
}

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
        const names = metricNames(expr)
        assert.isAbove(names.length, 0, `${panel.title}: ${expr} names no metric`)
        for (const name of names) {
          if (exporterMetrics.has(name)) continue
          assert.isTrue(known.has(base(name, known)), `panel "${panel.title}": ${name} is not a metric the apps export`)
        }
      }
    }
  })
})
