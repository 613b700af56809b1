/**
 * Benchmark (not a test): what `NOTIFY` in the enqueue's transaction costs the database, the evidence behind
 * docs/wake.md's choice of an HTTP wake. The enqueue-shaped transaction (`BEGIN`; `Enqueue.enqueue` of one item
 * through db-session's `transaction`, as the API's append does; `COMMIT`) runs back to back on 1, 8 and 32
 * concurrent writers, each with its own connection (a `queue` pool of that size), in three variants:
 *
 * - `plain`: the transaction as it is today (what the HTTP wake costs the database: nothing more);
 * - `notify`: `SELECT pg_notify('resilience_wake', <schema>:<n>)` in the same transaction, nobody listening;
 * - `notify+listen`: the same, with one listener session (`LISTEN resilience_wake` on a plain `pg.Client`, the
 *   one held connection the listener design needs per database) that counts the wake-ups and how long after
 *   the writer saw its `COMMIT` return each arrived.
 *
 * Printed per run: commits per second, commit latency (the whole transaction, client side) p50/p99, and for
 * the listener the wake-ups received and their delivery delay. PostgreSQL serialises the commits of
 * transactions that notified (a cluster-wide heavyweight lock on "database 0", taken before the commit record
 * and held until after the commit), so the cost shows as concurrency grows, and more with a durable commit (WAL
 * flushed at commit, no group commit across notifying transactions). Two servers, in order: production durability
 * (`fsync=on`, `synchronous_commit=on`: a cluster in a data directory of its own) first, then the throw-away
 * settings the tests use (`fsync=off`, `synchronous_commit=off`).
 *
 *   npm run bench:notify -w @resilience/deriver
 *
 * Bounded: BENCH_SECONDS per run (default 5, after 0.5 s of warm-up), BENCH_ROUNDS rounds of every run (default
 * 2, the variants' order reversed in the second so a drift of the machine's load favours none); BENCH_WRITERS (default 1,8,32),
 * BENCH_MODES (durable,throwaway), BENCH_VARIANTS (plain,notify,notify+listen) choose what runs. Stops by
 * itself; the clusters and the durable one's directory are removed at the end.
 */
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Console, Effect, Logger } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { Setup, Stats } from "../../../packages/bench-kit/src/index.ts"
import * as Enqueue from "../src/Enqueue.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

const seconds = Number(process.env.BENCH_SECONDS ?? 5)
const warmupMillis = 500
const writerCounts = Setup.list("BENCH_WRITERS", "1,8,32").map(Number)
const modes = Setup.list("BENCH_MODES", "durable,throwaway") as ReadonlyArray<"durable" | "throwaway">
const rounds = Number(process.env.BENCH_ROUNDS ?? 2)
const variants = Setup.list("BENCH_VARIANTS", "plain,notify,notify+listen") as ReadonlyArray<Variant>
type Variant = "plain" | "notify" | "notify+listen"

const channel = "resilience_wake"
const schema = SchemaName.makeUnsafe("bench_notify")

const now = () => performance.now()
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")

interface Run {
  readonly round: number
  readonly mode: string
  readonly variant: Variant
  readonly writers: number
  readonly commits: number
  readonly perSecond: number
  readonly p50: number
  readonly p99: number
  readonly received?: number
  readonly deliveryP50?: number
  readonly deliveryP99?: number
  readonly load: string
}

/** A listener session: `LISTEN` on a direct connection, recording when each wake-up arrived. */
const listener = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url, application_name: "bench-listener" })
      await client.connect()
      const arrived = new Map<number, number>()
      client.on("notification", (message) => {
        const n = Number(message.payload?.split(":")[1])
        arrived.set(n, now())
      })
      await client.query(`LISTEN ${channel}`)
      return { client, arrived }
    }),
    ({ client }) => Effect.promise(() => client.end().catch(() => undefined))
  )

const run = (url: string, round: number, mode: string, variant: Variant, writers: number) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* DbSession
    const listening = variant === "notify+listen" ? yield* listener(url) : undefined
    const committedAt = new Map<number, number>()
    const latencies: Array<number> = []
    let sequence = 0
    const startedAt = now()
    const measureFrom = startedAt + warmupMillis
    const deadline = measureFrom + seconds * 1000
    const writer = Effect.gen(function*() {
      while (now() < deadline) {
        const n = sequence++
        const began = now()
        yield* db.transaction((connection) =>
          Effect.gen(function*() {
            yield* Enqueue.enqueue(connection, schema, [{
              workUnitKey: `unit-${n % 1000}`,
              taskType: "bench",
              payload: {}
            }])
            if (variant !== "plain") {
              yield* connection.query("SELECT pg_notify($1, $2)", [channel, `${schema}:${n}`])
            }
          })
        )
        const ended = now()
        if (began >= measureFrom && ended <= deadline) {
          latencies.push(ended - began)
          committedAt.set(n, ended)
        }
      }
    })
    yield* Effect.forEach(Array.from({ length: writers }), () => writer, { concurrency: "unbounded", discard: true })
    // give the last wake-ups a moment to arrive
    if (listening !== undefined) yield* Effect.sleep("300 millis")
    const delivery = listening === undefined ? [] : [...committedAt].flatMap(([n, at]) => {
      const arrived = listening.arrived.get(n)
      return arrived === undefined ? [] : [arrived - at]
    })
    yield* db.query(`TRUNCATE ${SchemaName.qualify(schema, "queue")}`)
    const result: Run = {
      round,
      mode,
      variant,
      writers,
      commits: latencies.length,
      perSecond: latencies.length / seconds,
      p50: Stats.median(latencies),
      p99: Stats.quantile(latencies, 0.99),
      load: load(),
      ...(listening === undefined ? {} : {
        received: delivery.length,
        deliveryP50: Stats.median(delivery),
        deliveryP99: Stats.quantile(delivery, 0.99)
      })
    }
    return result
  }))

const session = (url: string, writers: number) =>
  DbSession.layer({
    url,
    connectTimeout: "5 seconds",
    poolClass: "queue",
    poolSize: writers,
    driver: "pg",
    applicationName: "bench-notify"
  })

const settingsOf = (url: string) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const rows = await client.query<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'server_version')"
    )
    await client.end()
    return rows.rows.map((r) => `${r.name}=${r.setting}`).join(", ")
  })

const forMode = (mode: "durable" | "throwaway") =>
  Effect.scoped(Effect.gen(function*() {
    const directory = mode === "durable" ? mkdtempSync(join(tmpdir(), "bench-notify-")) : undefined
    if (directory !== undefined) {
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(directory, { recursive: true, force: true })))
    }
    const cluster = yield* Cluster.start({ maxConnections: 100, ...(directory === undefined ? {} : { directory }) })
    yield* Console.log(`\n${mode}: ${yield* settingsOf(cluster.url)}`)
    yield* Migrator.run(schema, [QueueSchema.component]).pipe(Effect.provide(session(cluster.url, 1)))
    // a discarded warm-up (caches, the WAL's first segments), so that the first measured run is not the slowest
    yield* run(cluster.url, 0, mode, "plain", 8).pipe(Effect.provide(session(cluster.url, 8)))
    const runs: Array<Run> = []
    for (let round = 1; round <= rounds; round++) {
      for (const writers of writerCounts) {
        // the variants alternate their order between rounds, so a drift of the machine's load favours none
        for (const variant of round % 2 === 1 ? variants : variants.toReversed()) {
          const result = yield* run(cluster.url, round, mode, variant, writers).pipe(
            Effect.provide(session(cluster.url, writers))
          )
          runs.push(result)
          yield* Console.log(
            `  ${variant.padEnd(13)} writers=${String(writers).padStart(2)}  ${
              result.perSecond.toFixed(0).padStart(6)
            } commits/s` +
              `  p50 ${result.p50.toFixed(2)} ms  p99 ${result.p99.toFixed(2)} ms` +
              (result.received === undefined
                ? ""
                : `  wake-ups ${result.received}/${result.commits}, delivery p50 ${
                  result.deliveryP50!.toFixed(2)
                } ms p99 ${result.deliveryP99!.toFixed(2)} ms`) +
              `  (load ${result.load})`
          )
        }
      }
    }
    return runs
  }))

const table = (runs: ReadonlyArray<Run>) => {
  const lines = [
    "| server | round | writers | variant | commits/s | vs plain | p50 ms | p99 ms | wake-ups received | delivery p50 / p99 ms | load (1, 5, 15 min) |",
    "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|---|"
  ]
  for (const r of runs) {
    const plain = runs.find((p) =>
      p.mode === r.mode && p.writers === r.writers && p.variant === "plain" && p.round === r.round
    )
    const ratio = plain === undefined ? "" : `${((r.perSecond / plain.perSecond - 1) * 100).toFixed(0)} %`
    lines.push(
      `| ${r.mode} | ${r.round} | ${r.writers} | ${r.variant} | ${r.perSecond.toFixed(0)} | ${
        r.variant === "plain" ? "" : ratio
      } | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${
        r.received === undefined ? "" : `${r.received} / ${r.commits}`
      } | ${
        r.deliveryP50 === undefined ? "" : `${r.deliveryP50.toFixed(2)} / ${r.deliveryP99!.toFixed(2)}`
      } | ${r.load} |`
    )
  }
  return lines.join("\n")
}

const program = Effect.gen(function*() {
  yield* Console.log(`notify-cost: ${seconds} s per run, writers ${writerCounts.join(", ")}, load ${load()}`)
  const runs: Array<Run> = []
  for (const mode of modes) runs.push(...(yield* forMode(mode)))
  yield* Console.log(`\n${table(runs)}`)
})

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
