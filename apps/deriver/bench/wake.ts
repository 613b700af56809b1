/**
 * Benchmark (not a test): what the API's wake of its deriver buys and costs (issue #35), on real parts: a
 * dedicated PostgreSQL per pool class, the shipped PgBouncer in front of it for the `null` pool, the API and the
 * deriver apps as their own processes (`apps/api/src/main.ts`, `apps/deriver/src/main.ts`), loopback only.
 * Production defaults (base 1 s, cap 30 s, jitter 0.5, 1 worker, `DERIVER_WAKE_MIN_INTERVAL_SECONDS` 0.05,
 * `API_WAKE_TIMEOUT_MILLIS` 500) except the startup window (0 s) and `DERIVER_POLLING_INITIAL_INTERVAL=max`
 * (deploy/k8s's setting), so each deriver is at its cap from its first poll. Phases (`BENCH_PHASES`):
 *
 * - `pickup`: per pool class and wakes on/off, `BENCH_WRITES` (50) single-message writes through the API, each
 *   to a deriver idle at its cap (the bench waits until its schedule reads 30 s, then a uniform 0–10 s more);
 *   `BENCH_TENANTS` (5) tenants per configuration take turns. Pickup: from the API's 201 (client clock) to the
 *   item's `processed_at` (the server's clock, the same machine); p50, p99, max.
 * - `burst-db`: 1,000 writes within 1 s to one tenant (queue pool), committed straight into the database, each
 *   followed by the API's own sender's wake (on) or none (off): polls made and the time from the first write
 *   until every item is processed.
 * - `burst`: the same 1,000 writes sent through the API within 1 s (a 503 resent after its `Retry-After`).
 * - `recovery`: after a `BENCH_SATURATION_SECONDS` (120) saturation (the apps' backends killed, every slot held) with
 *   a client posting a write every second, the time from the API's first 201 after the release to that item
 *   processed, wakes on and off (`queue` pool).
 * - `faults`: the API's 201 latency over `BENCH_FAULT_WRITES` (300) writes (after 30 unmeasured), wakes off, and with the wake target
 *   down (a closed port: the deriver is gone), slow (accepts the connection, never answers) and refusing (answers
 *   503 at once): p50, p99, max and 5xx; the API's `wakes_failed_total` by reason.
 * - `flood`: 10,000 `POST /wake` per second (as many as the client manages) for 10 s at one idle deriver (`null`
 *   pool through a counting proxy: one connection attempt per poll): its polls and attempts against the bound,
 *   one poll per 50 ms.
 * - `idle`: connection attempts of an idle deriver (`null` pool, through a counting proxy) over
 *   `BENCH_IDLE_SECONDS` (300; the issue asks 10 minutes) with its API's wake on and off, counted from the moment
 *   its schedule is back at its cap after one write.
 *
 *   npm run bench:wake                                        # every phase (about 20 minutes)
 *   BENCH_PHASES=burst,faults npm run bench:wake
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { DbSession } from "@resilience/db-session"
import { Messages } from "@resilience/domain"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { CountingProxy, EntryPoint, PgBouncer, SilentListener } from "@resilience/test-db"
import { WakeSender } from "@resilience/wake"
import { Effect, Layer, Logger, References } from "effect"
import type { Scope } from "effect"
import { Agent, createServer, request, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { loadavg } from "node:os"
import { Setup, Stats } from "../../../packages/bench-kit/src/index.ts"

const phases = new Set(Setup.list("BENCH_PHASES", "pickup,burst-db,burst,recovery,faults,flood,idle"))
const writes = Number(process.env.BENCH_WRITES ?? 50)
const tenants = Number(process.env.BENCH_TENANTS ?? 5)
const faultWrites = Number(process.env.BENCH_FAULT_WRITES ?? 300)
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 300)
const saturationSeconds = Number(process.env.BENCH_SATURATION_SECONDS ?? 120)
/** The pickup's configurations: wakes on and off (`BENCH_PICKUP_WAKES=on` for on only). */
const pickupWakes = Setup.list("BENCH_PICKUP_WAKES", "on,off").map((value) => value === "on")
const adminToken = "bench-wake-admin-token"
const load = () => loadavg().map((n) => n.toFixed(1)).join(" ")
const nowMillis = () => performance.timeOrigin + performance.now()

const summary = (values: ReadonlyArray<number>, unit = "ms", digits = 1) =>
  `n=${values.length} p50 ${Stats.fixed(Stats.median(values), digits)} ${unit}, p99 ${
    Stats.fixed(Stats.quantile(values, 0.99), digits)
  } ${unit}, max ${Stats.fixed(Stats.max(values), digits)} ${unit}`

type Pool = "queue" | "null"

/** A server per pool class; the `null` pool reaches it through the shipped PgBouncer. */
const database = (pool: Pool) =>
  Effect.gen(function*() {
    const cluster = yield* Cluster.start({ maxConnections: 60 })
    const url = pool === "queue"
      ? cluster.url
      : (yield* Effect.orDie(PgBouncer.start({ upstream: cluster, maxClientConn: 200, poolSize: 20 }))).url
    const admin = yield* Layer.build(DbSession.layer({
      url: cluster.url,
      connectTimeout: "30 seconds",
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "bench-wake-admin"
    }))
    const sql = <Row>(text: string, params: ReadonlyArray<unknown> = []) =>
      Effect.provide(Effect.flatMap(Effect.service(DbSession), (db) => db.query<Row>(text, params)), admin).pipe(
        Effect.orDie
      )
    return { cluster, url, sql, admin }
  })

/** One HTTP request on a keep-alive agent: status and the time its headers arrived. */
const agent = new Agent({ keepAlive: true, maxSockets: 256 })
const http = (url: string, method: string, body?: string, headers: Record<string, string> = {}) =>
  Effect.callback<{ status: number; text: string; at: number; millis: number }>((resume) => {
    const started = nowMillis()
    const req = request(url, {
      method,
      agent,
      headers: { ...headers, ...(body === undefined ? {} : { "content-type": "application/json" }) }
    }, (res) => {
      const at = nowMillis()
      let text = ""
      res.on("data", (chunk: Buffer) => text += chunk.toString())
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, text, at, millis: at - started })))
    })
    req.on(
      "error",
      () => resume(Effect.succeed({ status: 0, text: "", at: nowMillis(), millis: nowMillis() - started }))
    )
    req.end(body)
  })

const metric = (text: string, name: string, labels = "") =>
  text.split("\n")
    .filter((line) => (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) && line.includes(labels))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)
const scrape = (url: string) => Effect.map(http(url, "GET"), (reply) => reply.text)

interface Tenant {
  readonly schema: SchemaName.SchemaName
  readonly apiUrl: string
  readonly metricsUrl: string
  readonly token: string
  readonly post: (
    content: string,
    session?: string,
    peer?: string
  ) => Effect.Effect<{ status: number; at: number; millis: number }>
}

/** An API and a deriver for one schema; the API wakes the deriver when `wake` (or at `wakeUrl`). */
const tenant = (options: {
  readonly name: string
  readonly url: string
  readonly deriverUrl?: string
  readonly pool: Pool
  readonly wake: boolean
  readonly wakeUrl?: string
  readonly apiEnv?: Record<string, string>
}): Effect.Effect<Tenant, never, Scope.Scope> =>
  Effect.gen(function*() {
    const schema = SchemaName.makeUnsafe(options.name)
    const metricsPort = yield* Cluster.freePort
    const apiPort = yield* Cluster.freePort
    const wakeUrl = options.wakeUrl ?? (options.wake ? `http://127.0.0.1:${metricsPort}/wake` : "")
    const api = yield* EntryPoint.start("apps/api/src/main.ts", {
      DATABASE_URL: options.url,
      DB_SCHEMA: schema,
      DB_POOL_CLASS: options.pool,
      API_PORT: String(apiPort),
      API_HOST: "127.0.0.1",
      API_ADMIN_TOKEN: adminToken,
      API_LOG_LEVEL: "Warn",
      API_WAKE_URL: wakeUrl,
      ...options.apiEnv
    }, { stopWith: "SIGTERM" })
    const apiUrl = `http://127.0.0.1:${apiPort}`
    for (let i = 0; (yield* http(`${apiUrl}/readyz`, "GET")).status !== 200; i++) {
      if (i > 600) return yield* Effect.die(new Error(`${options.name}: API not ready\n${api.output()}`))
      yield* Effect.sleep("100 millis")
    }
    const deriver = yield* EntryPoint.start("apps/deriver/src/main.ts", {
      DATABASE_URL: options.deriverUrl ?? options.url,
      DB_SCHEMA: schema,
      DB_POOL_CLASS: options.pool,
      DB_APPLICATION_NAME: `bench-wake-${options.name}`,
      DERIVER_METRICS_PORT: String(metricsPort),
      DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
      DERIVER_POLLING_INITIAL_INTERVAL: "max"
    }, { stopWith: "SIGTERM" })
    const metricsUrl = `http://127.0.0.1:${metricsPort}`
    for (let i = 0; (yield* http(`${metricsUrl}/readyz`, "GET")).status !== 200; i++) {
      if (i > 600) return yield* Effect.die(new Error(`${options.name}: deriver not ready\n${deriver.output()}`))
      yield* Effect.sleep("100 millis")
    }
    const created = yield* http(
      `${apiUrl}/v1/workspaces`,
      "POST",
      JSON.stringify({ name: "bench" }),
      { authorization: `Bearer ${adminToken}` }
    )
    const token = (JSON.parse(created.text) as { token: string }).token
    const post = (content: string, session = "s", peer = "alice") =>
      http(
        `${apiUrl}/v1/workspaces/bench/sessions/${session}/messages`,
        "POST",
        JSON.stringify({ messages: [{ peer, content }] }),
        { authorization: `Bearer ${token}` }
      )
    return { schema, apiUrl, metricsUrl, token, post }
  })

/** Waits until the deriver's schedule reads its cap (its current, unjittered interval is 30 s). */
const atCap = (t: Tenant) =>
  Effect.gen(function*() {
    while (metric(yield* scrape(`${t.metricsUrl}/metrics`), "deriver_poll_interval_seconds") < 30) {
      yield* Effect.sleep("250 millis")
    }
  })

type Sql = <Row>(text: string, params?: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<Row>>

/** A tenant's queue: its processed items, all its items, and when the last was processed (epoch ms). */
interface Counts {
  readonly n: number
  readonly total: number
  readonly last: number | null
}

const processedCount = (sql: Sql, schema: string) =>
  Effect.map(
    sql<Counts>(
      `SELECT count(*) FILTER (WHERE processed)::int AS n, count(*)::int AS total,
                (extract(epoch FROM max(processed_at)) * 1000)::float8 AS last
         FROM ${SchemaName.qualify(SchemaName.makeUnsafe(schema), "queue")}`
    ),
    (rows) => rows[0]!
  )

/** The queue's counts once `done` holds of them, or as they are `timeoutMillis` after `since`; read every 20 ms. */
const countsWhen = (
  sql: Sql,
  schema: string,
  done: (counts: Counts) => boolean,
  since: number,
  timeoutMillis: number
) =>
  Effect.gen(function*() {
    let counts = yield* processedCount(sql, schema)
    while (!done(counts) && nowMillis() - since < timeoutMillis) {
      yield* Effect.sleep("20 millis")
      counts = yield* processedCount(sql, schema)
    }
    return counts
  })

// ---------------------------------------------------------------------------------------------------------

const pickup = (pool: Pool) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database(pool)
    const result: Record<string, Array<number>> = {}
    yield* Effect.forEach(pickupWakes, (wake) =>
      Effect.gen(function*() {
        const label = `${pool} wakes ${wake ? "on" : "off"}`
        const group = yield* Effect.forEach(
          Array.from({ length: tenants }, (_, i) => i),
          (i) => tenant({ name: `p_${pool}_${wake ? "on" : "off"}_${i}`, url: db.url, pool, wake }),
          { concurrency: 1 }
        )
        const pickups: Array<number> = []
        result[label] = pickups
        const perTenant = Math.ceil(writes / tenants)
        yield* Effect.forEach(group, (t) =>
          Effect.gen(function*() {
            for (let n = 0; n < perTenant && pickups.length < writes; n++) {
              yield* atCap(t)
              yield* Effect.sleep(`${Math.round(Math.random() * 10_000)} millis`)
              const before = yield* processedCount(db.sql, t.schema)
              const reply = yield* t.post(`message ${n}`)
              if (reply.status !== 201) {
                console.log(`${label}: write answered ${reply.status}`)
                continue
              }
              let after = before
              const deadline = nowMillis() + 120_000
              while (after.n <= before.n && nowMillis() < deadline) {
                yield* Effect.sleep("10 millis")
                after = yield* processedCount(db.sql, t.schema)
              }
              pickups.push(after.last! - reply.at)
              if (pickups.length % 10 === 0) {
                console.log(`[pickup ${label}] ${summary(pickups)}; load ${load()}`)
              }
            }
          }), { concurrency: "unbounded", discard: true })
        console.log(`[pickup ${label}] ${summary(pickups)}; load ${load()}`)
      }), { concurrency: "unbounded", discard: true })
    return result
  }))

const burst = (wake: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database("queue")
    const t = yield* tenant({ name: `burst_${wake ? "on" : "off"}`, url: db.url, pool: "queue", wake })
    yield* atCap(t)
    const before = metric(yield* scrape(`${t.metricsUrl}/metrics`), "deriver_polls_total")
    const woken0 = metric(yield* scrape(`${t.metricsUrl}/metrics`), "deriver_polls_woken_total")
    const started = nowMillis()
    // 1,000 writes in 1 s: 20 per 20 ms, to 50 peers (50 work units) of one workspace
    const statuses: Array<number> = []
    const firstTry = new Map<number, number>()
    for (let slot = 0; slot < 50; slot++) {
      const at = started + slot * 20
      const wait = at - nowMillis()
      if (wait > 0) yield* Effect.sleep(`${Math.round(wait)} millis`)
      yield* Effect.forkDetach(Effect.forEach(
        Array.from({ length: 20 }, (_, i) => slot * 20 + i),
        (i) =>
          Effect.gen(function*() {
            // a client as the SDK is: a 503 is resent after its Retry-After (1 s here), same message
            for (let attempt = 0;; attempt++) {
              const reply = yield* t.post(`burst ${i}`, `s${i % 10}`, `peer${i % 50}`)
              if (attempt === 0) firstTry.set(reply.status, (firstTry.get(reply.status) ?? 0) + 1)
              if (reply.status === 201 || attempt >= 60) return statuses.push(reply.status)
              yield* Effect.sleep("1 second")
            }
          }),
        { concurrency: "unbounded", discard: true }
      ))
    }
    while (statuses.length < 1000) yield* Effect.sleep("10 millis")
    const written = nowMillis() - started
    const counts = yield* countsWhen(db.sql, t.schema, (c) => c.n === c.total, started, 300_000)
    const text = yield* scrape(`${t.metricsUrl}/metrics`)
    const polls = metric(text, "deriver_polls_total") - before
    const woken = metric(text, "deriver_polls_woken_total") - woken0
    const first = [...firstTry].map(([status, n]) => `${n} × ${status}`).join(", ")
    const accepted = statuses.filter((s) => s === 201).length
    const line = `[burst wakes ${wake ? "on" : "off"}] 1000 writes sent within 1 s (first answers ${first}; ` +
      `${accepted} accepted, resending 503s after Retry-After, by ${
        Stats.fixed(written, 0)
      } ms); ${counts.total} items, ` +
      `all processed ${Stats.fixed((counts.last ?? 0) - started, 0)} ms after the first write; ` +
      `${polls} polls (${woken} woken); load ${load()}`
    console.log(line)
    return line
  }))

/**
 * The same burst written straight into the database (1,000 single-message transactions within 1 s, 8 at a time),
 * each followed by the wake the API would send (`WakeSender`, the API's own sender, in this process): the deriver's
 * side of a burst without the API's throughput on this machine in the way.
 */
const burstDb = (wake: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database("queue")
    const t = yield* tenant({ name: `burstdb_${wake ? "on" : "off"}`, url: db.url, pool: "queue", wake: false })
    const sender = wake
      ? yield* WakeSender.make(
        yield* Effect.orDie(WakeSender.settings({ url: `${t.metricsUrl}/wake`, schema: t.schema }))
      )
      : WakeSender.disabled
    yield* atCap(t)
    const text0 = yield* scrape(`${t.metricsUrl}/metrics`)
    const started = nowMillis()
    yield* Effect.forEach(Array.from({ length: 1000 }, (_, i) => i), (i) =>
      Effect.gen(function*() {
        const due = started + i
        const wait = due - nowMillis()
        if (wait > 0) yield* Effect.sleep(`${Math.round(wait)} millis`)
        yield* Effect.provide(
          Messages.append(t.schema, "bench", `s${i % 10}`, [{ peer: `peer${i % 50}`, content: `burst ${i}` }]),
          db.admin
        ).pipe(Effect.orDie)
        yield* sender.wake
      }), { concurrency: 8, discard: true })
    const written = nowMillis() - started
    const counts = yield* countsWhen(db.sql, t.schema, (c) => c.n === c.total, started, 300_000)
    const text = yield* scrape(`${t.metricsUrl}/metrics`)
    const delta = (name: string, labels = "") => metric(text, name, labels) - metric(text0, name, labels)
    const line =
      `[burst-db wakes ${wake ? "on" : "off"}] 1000 writes committed in ${Stats.fixed(written, 0)} ms (the API's ` +
      `sender after each); ${counts.total} items, all processed ${
        Stats.fixed((counts.last ?? 0) - started, 0)
      } ms after ` +
      `the first write; ${delta("deriver_polls_total")} polls (${delta("deriver_polls_woken_total")} woken, ` +
      `${delta("deriver_polls_total", "result=\"claimed\"")} claimed, ${
        delta("deriver_polls_total", "result=\"empty\"")
      } empty, ${delta("deriver_polls_total", "result=\"busy\"")} busy: no attempt); wakes received ${
        delta("deriver_wakes_received_total")
      }; load ${load()}`
    console.log(line)
    return line
  }))

/**
 * After a saturation (every slot held, the apps' backends killed first) with a client posting a write every second
 * (503s), the time from the API's first 201 after the release to that item processed, wakes on and off.
 */
const recovery = (wake: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const label = `recovery wakes ${wake ? "on" : "off"}`
    const db = yield* database("queue")
    const t = yield* tenant({ name: `recovery_${wake ? "on" : "off"}`, url: db.url, pool: "queue", wake })
    yield* atCap(t)
    yield* db.sql(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE application_name IN ('resilience', $1) AND pid <> pg_backend_pid()`,
      [`bench-wake-${t.schema}`]
    )
    const saturation = yield* Effect.orDie(Saturation.hold(db.cluster.url, {
      applicationName: "saturator",
      patience: "1 second",
      connectTimeout: "30 seconds"
    }))
    const saturatedAt = nowMillis()
    let refused = 0
    while (nowMillis() - saturatedAt < saturationSeconds * 1000) {
      const reply = yield* t.post(`during ${refused}`)
      if (reply.status === 201) return yield* Effect.die(new Error(`${label}: a 201 during the saturation`))
      refused++
      yield* Effect.sleep("1 second")
    }
    yield* Effect.orDie(saturation.release)
    const releasedAt = nowMillis()
    // the client resends every second until its first 201
    let first: { at: number } | undefined
    for (let i = 0; first === undefined && i < 300; i++) {
      const reply = yield* t.post(`after ${i}`)
      if (reply.status === 201) first = reply
      else yield* Effect.sleep("1 second")
    }
    if (first === undefined) return yield* Effect.die(new Error(`${label}: no 201 within 300 s of the release`))
    const counts = yield* countsWhen(db.sql, t.schema, (c) => c.n > 0, first.at, 120_000)
    const line = `[${label}] ${saturationSeconds} s saturation (${saturation.held} slots held, ${refused} writes ` +
      `refused meanwhile); first 201 ${
        Stats.fixed((first.at - releasedAt) / 1000, 1)
      } s after the release; first item ` +
      `processed ${Stats.fixed((counts.last ?? Number.NaN) - first.at, 0)} ms after that 201; load ${load()}`
    console.log(line)
    return line
  }))

const faults = Effect.scoped(Effect.gen(function*() {
  const db = yield* database("queue")
  const silent = yield* SilentListener.start
  const closed = yield* Cluster.freePort
  // answers every wake at once with a 503 (a deriver that refuses: not started, or overloaded)
  const refusing = yield* Effect.acquireRelease(
    Effect.callback<Server>((resume) => {
      const server = createServer((_req, res) => res.writeHead(503, { "retry-after": "1" }).end())
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => server.close())
  )
  const targets: ReadonlyArray<readonly [string, string | undefined]> = [
    ["wakes off", undefined],
    ["target down (deriver gone: closed port, connection refused)", `http://127.0.0.1:${closed}/wake`],
    ["target slow (accepts, holds the socket, never answers)", `http://127.0.0.1:${silent.port}/wake`],
    ["target refusing (answers 503 at once)", `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/wake`]
  ]
  const lines: Array<string> = []
  for (const [index, [label, url]] of targets.entries()) {
    const t = yield* tenant({
      name: `fault_${index}`,
      url: db.url,
      pool: "queue",
      wake: false,
      ...(url === undefined ? {} : { wakeUrl: url })
    })
    // warm-up (JIT, the pool's connections), not measured
    for (let i = 0; i < 30; i++) yield* t.post(`warm-up ${i}`, `w${i % 5}`, `peer${i % 7}`)
    const millis: Array<number> = []
    let fivexx = 0
    for (let i = 0; i < faultWrites; i++) {
      const reply = yield* t.post(`fault ${i}`, `s${i % 5}`, `peer${i % 7}`)
      if (reply.status >= 500) fivexx++
      millis.push(reply.millis)
      yield* Effect.sleep("5 millis")
    }
    const api = yield* scrape(`${t.apiUrl}/metrics`)
    const line = `[faults ${label}] 201 latency ${summary(millis)}; 5xx ${fivexx}; wakes sent ${
      metric(api, "wakes_sent_total")
    }, failed ${metric(api, "wakes_failed_total")} (timeout ${
      metric(api, "wakes_failed_total", "reason=\"timeout\"")
    }, error ${metric(api, "wakes_failed_total", "reason=\"error\"")}, status ${
      metric(api, "wakes_failed_total", "reason=\"status\"")
    }), coalesced ${metric(api, "wakes_coalesced_total")}; load ${load()}`
    console.log(line)
    lines.push(line)
  }
  return lines
}))

const flood = Effect.scoped(Effect.gen(function*() {
  const db = yield* database("queue")
  const server = new URL(db.cluster.url)
  const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
  // the null pool, straight to the server through the counting proxy: every poll is one connection attempt
  const t = yield* tenant({
    name: "flood",
    url: db.cluster.url,
    deriverUrl: proxy.url(db.cluster.url),
    pool: "null",
    wake: false
  })
  yield* atCap(t)
  const text0 = yield* scrape(`${t.metricsUrl}/metrics`)
  const attempts0 = yield* proxy.attempts
  const body = JSON.stringify({ schema: t.schema })
  const floodAgent = new Agent({ keepAlive: true, maxSockets: 64 })
  let sent = 0
  let accepted = 0
  const started = nowMillis()
  const seconds = 10
  // 64 connections, each sending back to back, paced to 10,000 per second in total
  yield* Effect.forEach(Array.from({ length: 64 }, (_, i) => i), () =>
    Effect.callback<void>((resume) => {
      const next = () => {
        const elapsed = nowMillis() - started
        if (elapsed >= seconds * 1000) return resume(Effect.void)
        if (sent >= (elapsed / 1000) * 10_000) return void setTimeout(next, 1)
        sent++
        const req = request(`${t.metricsUrl}/wake`, {
          method: "POST",
          agent: floodAgent,
          headers: { "content-type": "application/json" }
        }, (res) => {
          if (res.statusCode === 202) accepted++
          res.resume()
          res.on("end", next)
        })
        req.on("error", next)
        req.end(body)
      }
      next()
    }), { concurrency: "unbounded", discard: true })
  const elapsed = (nowMillis() - started) / 1000
  floodAgent.destroy()
  const text = yield* scrape(`${t.metricsUrl}/metrics`)
  const polls = metric(text, "deriver_polls_total") - metric(text0, "deriver_polls_total")
  const woken = metric(text, "deriver_polls_woken_total") - metric(text0, "deriver_polls_woken_total")
  const attempts = (yield* proxy.attempts) - attempts0
  const line =
    `[flood] ${sent} POST /wake in ${Stats.fixed(elapsed)} s (${
      Stats.fixed(sent / elapsed, 0)
    }/s, ${accepted} × 202): ` +
    `${polls} polls (${woken} woken; bound 1 per 50 ms = ${Math.floor(elapsed * 20) + 1}), ${attempts} connection ` +
    `attempts (null pool: one per poll); received ${metric(text, "deriver_wakes_received_total")}, ` +
    `coalesced ${metric(text, "deriver_wakes_coalesced_total")}; load ${load()}`
  console.log(line)
  return line
}))

const idle = Effect.scoped(Effect.gen(function*() {
  const db = yield* database("queue")
  const server = new URL(db.cluster.url)
  const lines: Array<string> = []
  yield* Effect.forEach([true, false], (wake) =>
    Effect.gen(function*() {
      const proxy = yield* CountingProxy.start({ host: server.hostname, port: Number(server.port) })
      const t = yield* tenant({
        name: `idle_${wake ? "on" : "off"}`,
        url: db.cluster.url,
        deriverUrl: proxy.url(db.cluster.url),
        pool: "null",
        wake
      })
      // one write first (woken or not), processed; then idle from the moment the schedule is back at its cap
      yield* t.post("one write, then quiet")
      yield* atCap(t)
      while ((yield* processedCount(db.sql, t.schema)).n < 1) yield* Effect.sleep("100 millis")
      yield* atCap(t)
      const attempts0 = yield* proxy.attempts
      yield* Effect.sleep(`${idleSeconds} seconds`)
      const attempts = (yield* proxy.attempts) - attempts0
      const polls = metric(yield* scrape(`${t.metricsUrl}/metrics`), "deriver_polls_total")
      const line =
        `[idle wakes ${wake ? "on" : "off"}] ${attempts} connection attempts in ${idleSeconds} s after one ` +
        `write was processed and the schedule back at its cap (null pool: one attempt per poll; ${polls} polls since ` +
        `start); expected ~${Stats.fixed(idleSeconds / 30, 0)} (one per jittered 30 s); load ${load()}`
      console.log(line)
      lines.push(line)
    }), { concurrency: "unbounded", discard: true })
  return lines
}))

const program = Effect.gen(function*() {
  console.log(`wake bench: phases ${[...phases].join(", ")}; load ${load()} (2 cores, shared)`)
  const report: Array<string> = []
  if (phases.has("pickup")) {
    // both pool classes at once, each on its own server (the derivers wait idle most of the time)
    const figures = yield* Effect.forEach(["queue", "null"] as const, pickup, { concurrency: "unbounded" })
    for (const byLabel of figures) {
      for (const [label, values] of Object.entries(byLabel)) report.push(`pickup ${label}: ${summary(values)}`)
    }
  }
  if (phases.has("burst-db")) { for (const wake of [true, false]) report.push(yield* burstDb(wake)) }
  if (phases.has("burst")) { for (const wake of [true, false]) report.push(yield* burst(wake)) }
  if (phases.has("recovery")) {
    report.push(...(yield* Effect.forEach([true, false], recovery, { concurrency: "unbounded" })))
  }
  if (phases.has("faults")) report.push(...(yield* faults))
  if (phases.has("flood")) report.push(yield* flood)
  if (phases.has("idle")) report.push(...(yield* idle))
  console.log(`\nsummary (load ${load()}):\n${report.join("\n")}`)
})

program.pipe(
  Effect.provide(
    Layer.mergeAll(Logger.layer([Logger.consolePretty()]), Layer.succeed(References.MinimumLogLevel, "Warn"))
  ),
  NodeRuntime.runMain
)
