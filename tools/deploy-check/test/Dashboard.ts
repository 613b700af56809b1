/**
 * deploy/grafana/resilience.json as the dashboard tests read it: its panels, and the metric names each PromQL
 * expression names.
 */
import { readFileSync } from "node:fs"
import { repository } from "./Rendered.ts"

/** Metrics of postgres_exporter, not of the apps: the panels naming them say so in their description. */
export const exporterMetrics: ReadonlySet<string> = new Set(["pg_stat_activity_count"])

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
export const base = (name: string, known: ReadonlySet<string>): string => {
  if (known.has(name)) return name
  const stem = name.replace(/_(bucket|sum|count)$/, "")
  return known.has(stem) ? stem : name
}

export interface Panel {
  readonly id: number
  readonly title: string
  readonly type: string
  readonly datasource?: { readonly uid?: string }
  readonly targets?: ReadonlyArray<{ readonly expr: string; readonly datasource?: { readonly uid?: string } }>
}

/** The dashboard's JSON. */
export interface Dashboard {
  readonly schemaVersion: number
  readonly panels: ReadonlyArray<Panel>
  readonly templating: { readonly list: ReadonlyArray<{ readonly name: string; readonly type: string }> }
}

export const dashboard = JSON.parse(
  readFileSync(`${repository}deploy/grafana/resilience.json`, "utf8")
) as Dashboard

/**
 * Every metric an expression of `board` names that `known` does not have (postgres_exporter's excluded), as
 * `panel "title": name`; a histogram's `_bucket`/`_sum`/`_count` series count as their histogram when `known`
 * has it.
 */
export const unknownMetrics = (board: Dashboard, known: ReadonlySet<string>): ReadonlyArray<string> =>
  board.panels.flatMap((panel) =>
    (panel.targets ?? []).flatMap(({ expr }) =>
      metricNames(expr)
        .filter((name) => !exporterMetrics.has(name) && !known.has(base(name, known)))
        .map((name) => `panel "${panel.title}": ${name}`)
    )
  )
