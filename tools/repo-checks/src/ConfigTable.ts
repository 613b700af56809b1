/**
 * The root README's configuration table, read as a claim about the code: for each variable, the default it
 * names, the range it allows and the processes that read it. {@link probes} turns a row into values to try;
 * the test runs them through each process's own `Config` and compares.
 *
 * @since 0.1.0
 */

/**
 * One row of the table, as written.
 *
 * @since 0.1.0
 */
export interface Row {
  readonly variable: string
  readonly default: string
  readonly allowed: string
  readonly usedBy: ReadonlyArray<string>
}

const cells = (line: string): ReadonlyArray<string> =>
  line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => cell.trim())

const unquote = (text: string): string => text.replace(/^`(.*)`$/, "$1")

/**
 * The rows of the table under `## Configuration` in a README.
 *
 * @since 0.1.0
 */
export const parse = (readme: string): ReadonlyArray<Row> => {
  const section = readme.split(/^## /m).find((part) => part.startsWith("Configuration\n"))
  if (section === undefined) return []
  const lines = section.split("\n").filter((line) => line.startsWith("|"))
  const [header, , ...body] = lines
  if (header === undefined) return []
  const columns = cells(header)
  const at = (row: ReadonlyArray<string>, name: string) => row[columns.indexOf(name)] ?? ""
  return body.map((line) => {
    const row = cells(line)
    return {
      variable: unquote(at(row, "variable")),
      default: at(row, "default"),
      allowed: at(row, "allowed"),
      usedBy: at(row, "used by").split(",").map((reader) => unquote(reader.trim()))
    }
  })
}

/**
 * What to try for one row: values a reader must accept, values it must reject (naming the variable), the value
 * that must read the same as leaving the variable unset (the default), and whether a free-form value must change
 * what the process reads (for kinds with nothing to reject: text, URLs, addresses).
 *
 * @since 0.1.0
 */
export interface Probes {
  readonly accepted: ReadonlyArray<string>
  readonly rejected: ReadonlyArray<string>
  readonly default: string | undefined
  readonly changes: string | undefined
}

/**
 * Words the table uses for another setting's value as a bound, and the variable each names. `that` is the row
 * before; a backticked variable name is that variable.
 *
 * @since 0.1.0
 */
export const boundNames: Readonly<Record<string, string>> = {
  base: "DERIVER_POLLING_SLEEP_INTERVAL_SECONDS",
  "max interval": "DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS",
  max: "API_ADMISSION_MAX_CONCURRENCY"
}

/** A value big enough to find an undocumented cap, small enough to be a finite duration in milliseconds. */
const huge = 1e9

const number = (text: string): number | undefined => {
  const cleaned = text.replace(/,/g, "").trim()
  return /^-?\d+(\.\d+)?$/.test(cleaned) ? Number(cleaned) : undefined
}

const show = (value: number): string => String(Number(value.toPrecision(12)))

/** The value a bound stands for: a number, or another variable's value in `values`. */
const boundValue = (
  text: string,
  previous: string | undefined,
  values: Readonly<Record<string, string>>
): number | undefined => {
  const literal = number(text)
  if (literal !== undefined) return literal
  const named = /^`([A-Z_]+)`$/.exec(text)?.[1]
  const variable = named ?? (text === "that" ? previous : boundNames[text])
  return variable === undefined ? undefined : number(values[variable] ?? "")
}

/**
 * The variables whose lower bound is `variable` (`≥ base`, `[that, …]`): probing `variable` high raises them
 * with it, so that the probe tests this row's range and not theirs.
 *
 * @since 0.1.0
 */
export const dependents = (rows: ReadonlyArray<Row>, variable: string): ReadonlyArray<string> =>
  rows.flatMap((row, index) => {
    const lower = /(?:≥|\[)\s*([a-z ]+?|`[A-Z_]+`)\s*(?:,|$)/.exec(row.allowed)?.[1]
    if (lower === undefined) return []
    const named = lower.startsWith("`")
      ? lower.slice(1, -1)
      : lower === "that"
      ? rows[index - 1]?.variable
      : boundNames[lower]
    return named === variable ? [row.variable, ...dependents(rows, row.variable)] : []
  })

/**
 * The probes of a row, given the documented values of the others (for bounds that name another setting). An
 * `allowed` text this does not understand is an error, so a new kind of range cannot pass unchecked.
 *
 * @since 0.1.0
 */
export const probes = (
  row: Row,
  previous: string | undefined,
  values: Readonly<Record<string, string>>
): Probes | string => {
  const allowed = row.allowed
  const integer = allowed.startsWith("integer")
  const range = allowed.replace(/^integer\s*(in\s*)?/, "")
  const defaultValue = documentedDefault(row.default)
  const step = integer ? 1 : 0.001
  const notInteger = (low: number) => (integer ? [show(low + 0.5)] : [])
  const interval = /^([[(])\s*([^,]+?)\s*,\s*([^\])]+?)\s*([\])])$/.exec(range)
  if (interval !== null) {
    const [, open, lowText = "", highText = "", close] = interval
    const low = boundValue(lowText, previous, values)
    const high = boundValue(highText, previous, values)
    const accepted: Array<string> = []
    const rejected: Array<string> = []
    if (low !== undefined) {
      if (open === "[") accepted.push(show(low))
      rejected.push(show(open === "[" ? low - step : low))
      accepted.push(...(open === "(" ? [show(low + step)] : []))
      rejected.push(...notInteger(low))
    }
    if (high !== undefined) {
      if (close === "]") accepted.push(show(high))
      rejected.push(show(close === "]" ? high + step : high))
    }
    if (low === undefined && high === undefined) return `bounds of "${allowed}" not understood`
    return { accepted, rejected, default: defaultValue, changes: undefined }
  }
  const oneSided = /^([>≥])\s*(.+)$/.exec(range)
  if (oneSided !== null && !range.includes("characters")) {
    const [, relation, boundText = ""] = oneSided
    const low = boundValue(boundText, previous, values)
    if (low === undefined) return `bound "${boundText}" not understood`
    return {
      accepted: [show(relation === "≥" ? low : low + step), show(Math.max(huge, low + step))],
      rejected: [show(relation === "≥" ? low - step : low), ...notInteger(low)],
      default: defaultValue,
      changes: undefined
    }
  }
  const characters = /^≥\s*(\d+) characters$/.exec(allowed)
  if (characters !== null) {
    const length = Number(characters[1])
    return {
      accepted: ["k".repeat(length)],
      rejected: ["k".repeat(length - 1)],
      default: defaultValue,
      changes: undefined
    }
  }
  const literals = [...allowed.matchAll(/`([^`]+)`/g)].map((match) => match[1] ?? "")
  if (literals.length > 0 && allowed.replace(/`[^`]+`|,|\s/g, "") === "") {
    return { accepted: literals, rejected: ["no-such-choice"], default: defaultValue, changes: undefined }
  }
  switch (allowed) {
    case "boolean":
    case "true, false":
      return { accepted: ["true", "false"], rejected: ["maybe"], default: defaultValue, changes: undefined }
    case "port, 0 = any":
      return { accepted: ["0", "65535"], rejected: ["65536", "-1", "80.5"], default: defaultValue, changes: undefined }
    case "port":
      return { accepted: ["1", "65535"], rejected: ["65536", "-1"], default: defaultValue, changes: undefined }
    case "libpq `sslmode`":
      return {
        accepted: ["disable", "prefer", "require", "verify-ca", "verify-full"],
        rejected: ["no-verify", "allow"],
        default: defaultValue,
        changes: undefined
      }
    case "Effect log level":
      return { accepted: ["Debug", "Warn"], rejected: ["Loud"], default: defaultValue, changes: undefined }
    case "identifier":
      return { accepted: ["tenant_7"], rejected: ["no spaces"], default: defaultValue, changes: "tenant_7" }
    case "URL":
    case "PostgreSQL URL":
      return { accepted: [], rejected: [], default: defaultValue, changes: "http://127.0.0.1:1/changed" }
    case "text":
    case "address":
    case "directory":
    case "file":
      return { accepted: [], rejected: [], default: defaultValue, changes: "changed-by-the-check" }
    default:
      return `allowed "${allowed}" not understood`
  }
}

/**
 * The default a row documents, when it is one value: a number or a backticked literal (`true`/`false` as
 * written). `undefined` for defaults that depend on another setting, are generated, or mean "unset".
 *
 * @since 0.1.0
 */
export const documentedDefault = (text: string): string | undefined => {
  // "9464 (9091 under `npm start`)": the first is the processes' own; "10 × max interval (300)": the value it comes to
  const local = /^(.+?) \(.* under `npm start`\)$/.exec(text)
  if (local !== null) return documentedDefault(local[1] ?? "")
  // "30000 (or `API_ADMISSION_OPEN_MILLIS` if longer)": the value at the other defaults
  const leading = /^([\d.,]+) \(/.exec(text)
  if (leading !== null) return documentedDefault(leading[1] ?? "")
  const comesTo = /\(([\d.,]+)\)$/.exec(text)
  if (comesTo !== null) return documentedDefault(comesTo[1] ?? "")
  const literal = /^`([^`]+)`$/.exec(text)
  if (literal !== null) return literal[1]
  if (text === "true" || text === "false") return text
  const value = number(text)
  return value === undefined ? undefined : show(value)
}
