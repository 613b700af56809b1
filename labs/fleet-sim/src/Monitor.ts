/**
 * The operator's monitor: the {@link ActivitySampler} at 10 Hz, folded into one line per interval with the
 * peak active backends and connections per `application_name` (and the total).
 *
 * @since 0.1.0
 */
import { DateTime, Effect } from "effect"
import type { Scope } from "effect"
import * as ActivitySampler from "./ActivitySampler.ts"

/**
 * Formats one interval's peaks: a total line, then one line per application, busiest first.
 *
 * @since 0.1.0
 */
export const format = (
  at: string,
  peaks: ReadonlyMap<string, { active: number; connections: number }>,
  total: { active: number; connections: number }
): string => {
  const apps = [...peaks.entries()].sort((a, b) => b[1].active - a[1].active || a[0].localeCompare(b[0]))
  const line = (time: string, name: string, v: { active: number; connections: number }) =>
    `${time.padEnd(8)}  ${name.slice(0, 34).padEnd(34)}  ${String(v.active).padStart(6)}  ${
      String(v.connections).padStart(5)
    }`
  return [line(at, "(all)", total), ...apps.map(([name, v]) => line("", name, v))].join("\n")
}

/**
 * Samples `url` at 10 Hz and emits one formatted block per `intervalMillis`, until interrupted.
 *
 * @since 0.1.0
 */
export const run = (
  url: string,
  intervalMillis: number,
  emit: (block: string) => Effect.Effect<void>
): Effect.Effect<never, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const client = yield* ActivitySampler.connect(url)
    let windowStart = -1
    let peaks = new Map<string, { active: number; connections: number }>()
    let total = { active: 0, connections: 0 }
    return yield* ActivitySampler.run(client, 100, (sample) =>
      Effect.gen(function*() {
        if (windowStart < 0) windowStart = sample.atMillis
        if (sample.atMillis - windowStart >= intervalMillis) {
          const at = DateTime.formatIso(DateTime.makeUnsafe(windowStart)).slice(11, 19)
          yield* emit(format(at, peaks, total))
          windowStart = sample.atMillis
          peaks = new Map()
          total = { active: 0, connections: 0 }
        }
        let active = 0
        let connections = 0
        for (const [name, v] of sample.byApplication) {
          const peak = peaks.get(name) ?? { active: 0, connections: 0 }
          peaks.set(name, {
            active: Math.max(peak.active, v.active),
            connections: Math.max(peak.connections, v.connections)
          })
          active += v.active
          connections += v.connections
        }
        total = { active: Math.max(total.active, active), connections: Math.max(total.connections, connections) }
      }))
  })
