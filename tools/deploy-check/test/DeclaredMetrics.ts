/**
 * The metric names the workspaces (product, labs and tools) declare, read from their sources: what the alert rules
 * and the dashboard may name.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { repository } from "./Rendered.ts"

/** Every metric name the packages and apps declare: the first argument of their counter/gauge/histogram calls. */
export const declared = (): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const parent of ["packages", "apps", "labs", "tools"]) {
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
