/** Reading one sample out of a Prometheus text exposition (what the demo watches on the deriver). */
import { Effect } from "effect"

/** The sum of every sample of `name` whose labels contain `labels` (e.g. `result="error"`); 0 when absent. */
export const sample = (text: string, name: string, labels = ""): number =>
  text.split("\n")
    .filter((line) => line.startsWith(name) && (line[name.length] === " " || line[name.length] === "{"))
    .filter((line) => line.includes(labels))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)

/** Fetches an exposition. */
export const scrape = (url: string): Effect.Effect<string> =>
  Effect.promise(() => fetch(url).then((response) => response.text()))
