/**
 * Benchmark (not a test): a slow host is not a slow database. One real deriver process (`starved-deriver.ts`,
 * production defaults, `DB_POOL_CLASS=null`) against a real PostgreSQL, its CPU cut to a fraction of a core
 * once it has started: a cgroup (v1 `cpu` controller, `cpu.cfs_quota_us`, as a Kubernetes CPU limit does),
 * shared with BENCH_GROUP_SIBLINGS busy processes (default 1: a pod's other process spending the quota), when
 * /sys/fs/cgroup/cpu is writable, otherwise `taskset` onto CPU 0 beside busy siblings. Cases, in order:
 *
 * 1. `control`: not starved, healthy database, the fix on;
 * 2. `starved, before`: starved, healthy database, the lag not subtracted (the behaviour before 0.3.0);
 * 3. `starved, fix`: starved, healthy database, the fix on (the default);
 * 4. `starved + thrash, fix`: starved, and every claim on the server takes `BENCH_THRASH_SECONDS` longer
 *    (`pg_sleep` injected into the schema's `queue_claim`): a slow database must still raise the floor.
 *
 * Meanwhile one item is enqueued every ~BENCH_ENQUEUE_SECONDS (±50 %): its pickup is from the enqueue's
 * commit to its handler. Printed per case: polls, slow signals, the highest floor, the sleeps (median, max),
 * the process's own lag per poll (its own probe), pickups (median, max).
 *
 *   npm run bench:starved -w @resilience/deriver
 *
 * Bounded: BENCH_CASE_SECONDS per case (default 150; the control 60), BENCH_QUOTA_PERCENT of one core
 * (default 2), BENCH_SIBLINGS for the taskset fallback (default 8), BENCH_THRASH_SECONDS (default 2.5),
 * BENCH_CASES (default all: control,before,fix,thrash). Stops by itself; the child, the siblings, the cgroup
 * and the cluster are removed at the end.
 */
import { DbSession } from "@resilience/db-session"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Console, Effect, Logger } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdirSync, rmdirSync, writeFileSync } from "node:fs"
import { loadavg } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import * as Queue from "../src/Queue.ts"
import * as QueueSchema from "../src/QueueSchema.ts"

const caseSeconds = Number(process.env.BENCH_CASE_SECONDS ?? 150)
const quotaPercent = Number(process.env.BENCH_QUOTA_PERCENT ?? 2)
const siblings = Number(process.env.BENCH_SIBLINGS ?? 8)
const groupSiblings = Number(process.env.BENCH_GROUP_SIBLINGS ?? 1)
const thrashSeconds = Number(process.env.BENCH_THRASH_SECONDS ?? 2.5)
const enqueueSeconds = Number(process.env.BENCH_ENQUEUE_SECONDS ?? 20)
const caseNames = (process.env.BENCH_CASES ?? "control,before,fix,thrash").split(",")
const here = dirname(fileURLToPath(import.meta.url))
const cgroupRoot = "/sys/fs/cgroup/cpu"

interface Case {
  readonly name: string
  readonly label: string
  readonly starved: boolean
  readonly subtractLag: boolean
  readonly thrash: boolean
  readonly seconds: number
}
const cases: ReadonlyArray<Case> = [
  { name: "control", label: "control (not starved)", starved: false, subtractLag: true, thrash: false, seconds: 60 },
  { name: "before", label: "starved, before", starved: true, subtractLag: false, thrash: false, seconds: caseSeconds },
  { name: "fix", label: "starved, fix", starved: true, subtractLag: true, thrash: false, seconds: caseSeconds },
  {
    name: "thrash",
    label: "starved + thrash, fix",
    starved: true,
    subtractLag: true,
    thrash: true,
    seconds: caseSeconds
  }
].filter((c) => caseNames.includes(c.name))

interface Polled {
  readonly at: number
  readonly outcome: string
  readonly signal: string
  readonly sleepMillis: number
  readonly intervalMillis: number
  readonly floorMillis: number
  readonly stalledMillis: number
}

const load = () => loadavg().map((l) => l.toFixed(2)).join(" ")
const s = (millis: number) => Number.isNaN(millis) ? "-" : `${(millis / 1000).toFixed(2)} s`

/** Kills a process and resolves once it has exited. */
const exited = (running: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (running.exitCode !== null || running.signalCode !== null) return resolve()
    running.once("exit", () => resolve())
    running.kill("SIGKILL")
  })

/** Cuts a process's CPU: a cgroup with a quota, or taskset beside busy siblings. Returns the undo. */
const starve = (child: ChildProcess): { readonly how: string; readonly undo: () => Promise<void> } => {
  const pid = child.pid!
  const group = join(cgroupRoot, `bench-starved-${process.pid}`)
  try {
    if (!existsSync(group)) mkdirSync(group)
    const period = 100_000
    writeFileSync(join(group, "cpu.cfs_period_us"), String(period))
    writeFileSync(join(group, "cpu.cfs_quota_us"), String(Math.max(1000, Math.round(period * quotaPercent / 100))))
    writeFileSync(join(group, "cgroup.procs"), String(pid))
    // the pod's other processes share its quota: busy ones spend it before the deriver wakes
    const busy = Array.from(
      { length: groupSiblings },
      () => spawn(process.execPath, ["-e", "for(;;){}"], { stdio: "ignore" })
    )
    for (const b of busy) writeFileSync(join(group, "cgroup.procs"), String(b.pid))
    return {
      how:
        `cgroup cpu.cfs_quota_us ${quotaPercent} % of one core (period 100 ms), shared with ${groupSiblings} busy process(es)`,
      undo: async () => {
        await Promise.all(busy.map((b) => exited(b)))
        // the processes leave the group as they exit; then it can go (a few tries: the kernel may lag)
        for (let attempt = 0; attempt < 20; attempt++) {
          try {
            rmdirSync(group)
            return
          } catch {
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
        }
      }
    }
  } catch {
    spawnSync("taskset", ["-a", "-p", "-c", "0", String(pid)])
    const busy = Array.from(
      { length: siblings },
      () => spawn("taskset", ["-c", "0", process.execPath, "-e", "for(;;){}"], { stdio: "ignore" })
    )
    return {
      how: `taskset CPU 0 beside ${siblings} busy siblings`,
      undo: async () => {
        await Promise.all(busy.map((b) => exited(b)))
      }
    }
  }
}

/** Replaces the schema's `queue_claim` with one that sleeps first (the database is slow, not the host). */
const injectSleep = (url: string, schema: SchemaName.SchemaName) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    const claim = Queue.functions(schema).claim
    // the five-argument function the deriver's polls and records call (queue migration 8); the three-argument one calls it by name
    await client.query(`ALTER FUNCTION ${claim}(integer, text, integer, float8, bigint) RENAME TO queue_claim_fast`)
    await client.query(
      `CREATE FUNCTION ${claim}(integer, text, integer, float8, bigint)
       RETURNS TABLE (work_unit_key text, id text, items text)
       LANGUAGE plpgsql AS $$ BEGIN
         PERFORM pg_sleep(${thrashSeconds});
         RETURN QUERY SELECT * FROM ${SchemaName.qualify(schema, "queue_claim_fast")}($1, $2, $3, $4, $5);
       END $$`
    )
    await client.end()
  })

const runCase = (url: string, c: Case, index: number) =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(`bench_starved_${index}`)
    const session = DbSession.layer({ url, connectTimeout: "5 seconds", poolClass: "null", poolSize: 1, driver: "pg" })
    yield* Migrator.run(schema, [QueueSchema.component]).pipe(Effect.provide(session))
    if (c.thrash) yield* injectSleep(url, schema)
    const polls: Array<Polled> = []
    const processed = new Map<number, number>()
    const child = spawn(
      process.execPath,
      ["--conditions=@resilience/source", join(here, "starved-deriver.ts")],
      {
        env: { ...process.env, DATABASE_URL: url, BENCH_SCHEMA: schema, BENCH_SUBTRACT_LAG: String(c.subtractLag) },
        stdio: ["ignore", "pipe", "inherit"]
      }
    )
    let ready: () => void = () => {}
    const started = new Promise<void>((resolve) => (ready = resolve))
    let buffer = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      buffer += chunk.toString()
      const lines = buffer.split("\n")
      buffer = lines.pop()!
      for (const l of lines) {
        const value = JSON.parse(l) as "ready" | Polled | { processed: { n: number }; at: number }
        if (value === "ready") ready()
        else if ("processed" in value) processed.set(value.processed.n, value.at)
        else polls.push(value)
      }
    })
    yield* Effect.promise(() => started)
    const starvation = c.starved ? starve(child) : { how: "none", undo: () => Promise.resolve() }
    const from = Date.now()
    const sent = new Map<number, number>()
    const client = new pg.Client({ connectionString: url })
    yield* Effect.promise(() => client.connect())
    let n = 0
    while (Date.now() - from < c.seconds * 1000) {
      const wait = enqueueSeconds * 1000 * (0.5 + Math.random())
      const until = Math.min(from + c.seconds * 1000, Date.now() + wait)
      yield* Effect.sleep(Math.max(0, until - Date.now()))
      if (Date.now() - from >= c.seconds * 1000 - 5000) break
      const item = n++
      yield* Effect.promise(() =>
        client.query(
          `INSERT INTO ${
            SchemaName.qualify(schema, "queue")
          } (work_unit_key, task_type, payload) VALUES ($1, 'bench', $2)`,
          [`unit-${item}`, JSON.stringify({ n: item })]
        )
      )
      sent.set(item, Date.now())
    }
    yield* Effect.sleep("3 seconds")
    yield* Effect.promise(() => client.end())
    const stopped = new Promise<void>((resolve) => child.once("exit", () => resolve()))
    child.kill("SIGTERM")
    yield* Effect.promise(() => Promise.race([stopped, new Promise((resolve) => setTimeout(resolve, 5000))]))
    yield* Effect.promise(() => exited(child))
    yield* Effect.promise(() => starvation.undo())
    const during = polls.filter((p) => p.at >= from)
    const lags = during.slice(1).map((p, i) => p.stalledMillis - during[i]!.stalledMillis)
    const pickups = [...sent].map(([item, at]) => (processed.get(item) ?? NaN) - at)
    return {
      c,
      how: starvation.how,
      polls: during.length,
      slow: during.filter((p) => p.signal === "slow" || p.signal === "cancelled").length,
      maxFloor: Math.max(0, ...during.map((p) => p.floorMillis)),
      sleepP50: Stats.median(during.map((p) => p.sleepMillis)),
      sleepMax: Math.max(0, ...during.map((p) => p.sleepMillis)),
      lagP50: Stats.median(lags),
      lagMax: Math.max(0, ...lags),
      sent: sent.size,
      picked: pickups.filter((p) => !Number.isNaN(p)).length,
      pickupP50: Stats.median(pickups.filter((p) => !Number.isNaN(p))),
      pickupMax: Math.max(0, ...pickups.filter((p) => !Number.isNaN(p))),
      load: load()
    }
  })

const program = Effect.scoped(Effect.gen(function*() {
  yield* Console.log(`starved-host: ${caseSeconds} s per starved case, load ${load()}`)
  const cluster = yield* Cluster.start({ maxConnections: 50 })
  const rows: Array<string> = []
  let index = 0
  for (const c of cases) {
    yield* Console.log(`${c.label}…`)
    const r = yield* runCase(cluster.url, c, index++)
    const row = `| ${c.label} | ${r.how} | ${c.seconds} | ${r.polls} | ${r.slow} | ${s(r.maxFloor)} | ${
      s(r.sleepP50)
    } / ${s(r.sleepMax)} | ${s(r.lagP50)} / ${s(r.lagMax)} | ${r.picked} / ${r.sent} | ${s(r.pickupP50)} / ${
      s(r.pickupMax)
    } | ${r.load} |`
    yield* Console.log(row)
    rows.push(row)
  }
  yield* Console.log(
    [
      "",
      "| case | CPU | s | polls | slow signals | highest floor | sleep p50 / max | own lag per poll p50 / max | picked up | pickup p50 / max | load (1, 5, 15 min) |",
      "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
      ...rows
    ].join("\n")
  )
}))

Effect.runPromise(program.pipe(Effect.provide(Logger.layer([])))).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
