/**
 * SVG charts rendered with Vega-Lite and Vega in Node (no browser, no canvas): the run's active backends and
 * client connections over time, like the incident's monitoring graphs, and the sweep's vulnerable region. Vega and
 * Vega-Lite load when a chart is rendered, not with this module (~0.5 s of CPU for every process that imports the
 * simulator).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import type * as vegaLite from "vega-lite"

/**
 * One line of a time-series chart: per-second values.
 *
 * @since 0.1.0
 */
export interface Line {
  readonly name: string
  readonly values: ArrayLike<number>
}

/**
 * A panel of a time-series chart: lines sharing one y axis, and an optional horizontal rule (a ceiling).
 *
 * @since 0.1.0
 */
export interface Panel {
  readonly title: string
  readonly lines: ReadonlyArray<Line>
  readonly rule?: { readonly label: string; readonly value: number } | undefined
}

/**
 * Renders a Vega-Lite specification to an SVG string.
 *
 * @since 0.1.0
 */
export const render = (spec: vegaLite.TopLevelSpec): Effect.Effect<string> =>
  Effect.promise(async () => {
    const [vega, { compile }] = await Promise.all([import("vega"), import("vega-lite")])
    const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" })
    return view.toSVG().finally(() => view.finalize())
  })

/** Keeps at most `limit` points per line by taking the maximum of each bucket (peaks stay visible). */
const downsample = (values: ArrayLike<number>, limit: number): Array<{ second: number; value: number }> => {
  // `second` is the index of the value; the caller scales it by the step.
  const bucket = Math.max(1, Math.ceil(values.length / limit))
  const points: Array<{ second: number; value: number }> = []
  for (let start = 0; start < values.length; start += bucket) {
    let max = -Infinity
    for (let s = start; s < Math.min(values.length, start + bucket); s++) max = Math.max(max, values[s]!)
    points.push({ second: start, value: max })
  }
  return points
}

/**
 * Stacked time-series panels sharing the time axis (minutes). Long series are reduced to per-bucket peaks.
 *
 * @since 0.1.0
 */
export const timeSeries = (
  title: string,
  panels: ReadonlyArray<Panel>,
  options: {
    readonly width?: number
    readonly height?: number
    readonly maxPoints?: number
    /** Seconds per value (default 1). */
    readonly step?: number
    /** Time axis unit (default minutes). */
    readonly unit?: "seconds" | "minutes"
  } = {}
): Effect.Effect<string> => {
  const step = options.step ?? 1
  const unit = options.unit ?? "minutes"
  const width = options.width ?? 900
  const height = options.height ?? 200
  const maxPoints = options.maxPoints ?? 3000
  const vconcat = panels.map((panel) => {
    const values = panel.lines.flatMap((line) =>
      downsample(line.values, maxPoints).map((p) => ({
        time: unit === "minutes" ? p.second * step / 60 : p.second * step,
        value: p.value,
        series: line.name
      }))
    )
    const layers: Array<Record<string, unknown>> = [{
      data: { values },
      mark: { type: "line", strokeWidth: 1.5, interpolate: "step-after" },
      encoding: {
        x: { field: "time", type: "quantitative", title: unit },
        y: { field: "value", type: "quantitative", title: panel.title },
        color: { field: "series", type: "nominal", title: null, legend: { orient: "top" } }
      }
    }]
    if (panel.rule !== undefined) {
      // drawn first, so a series that sits on the ceiling stays visible on top of it
      layers.unshift({
        data: { values: [{ value: panel.rule.value, label: panel.rule.label }] },
        layer: [
          {
            mark: { type: "rule", strokeDash: [4, 4], color: "#d62728" },
            encoding: { y: { field: "value", type: "quantitative" } }
          },
          {
            mark: { type: "text", align: "left", dx: 4, dy: -6, color: "#d62728" },
            encoding: { y: { field: "value", type: "quantitative" }, x: { datum: 0 }, text: { field: "label" } }
          }
        ]
      })
    }
    return { title: panel.title, width, height, layer: layers }
  })
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title,
    background: "white",
    vconcat,
    resolve: { scale: { color: "independent" } }
  } as unknown as vegaLite.TopLevelSpec
  return render(spec)
}

/**
 * A heat map: one cell per `(x, y)` with a nominal outcome colour and a text label (the sweep's table).
 *
 * @since 0.1.0
 */
export const grid = (
  title: string,
  cells: ReadonlyArray<
    {
      readonly x: string
      readonly y: string
      readonly outcome: string
      readonly label: string
      /** With several columns (e.g. one per policy), one map per column, side by side. */
      readonly column?: string | undefined
    }
  >,
  axes: { readonly x: string; readonly y: string }
): Effect.Effect<string> => {
  const sortX = [...new Set(cells.map((c) => c.x))]
  const sortY = [...new Set(cells.map((c) => c.y))].toReversed()
  const columns = [...new Set(cells.map((c) => c.column))]
  const map = {
    width: Math.max(300, 90 * sortX.length),
    height: Math.max(200, 45 * sortY.length),
    encoding: {
      x: { field: "x", type: "ordinal", title: axes.x, sort: sortX },
      y: { field: "y", type: "ordinal", title: axes.y, sort: sortY }
    },
    layer: [
      {
        mark: "rect",
        encoding: {
          color: {
            field: "outcome",
            type: "nominal",
            title: null,
            scale: {
              domain: ["recovers", "slow recovery", "relapses", "collapsed"],
              range: ["#9ecf8f", "#f6d06f", "#f4a261", "#e06666"]
            },
            legend: { orient: "top" }
          }
        }
      },
      { mark: { type: "text", fontSize: 11 }, encoding: { text: { field: "label" } } }
    ]
  }
  const spec = {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title,
    background: "white",
    data: { values: cells },
    ...(columns.length > 1
      ? { facet: { column: { field: "column", type: "nominal", title: null, sort: columns } }, spec: map }
      : map)
  } as unknown as vegaLite.TopLevelSpec
  return render(spec)
}
