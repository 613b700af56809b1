/**
 * Benchmark (not a test): what `npm start`'s apps cost the server, statement by statement (issue #45: on Debian's
 * PostgreSQL 15, built with LLVM and `jit = on` by default, every claim was JIT-compiled, ~250 ms of server CPU a
 * poll). It runs `npm start`'s entry point (`packages/launcher/src/bin/start.ts` of `BENCH_TREE`, default this
 * checkout) as a child process, as a user would, with the launcher's defaults but `DERIVER_WORKERS=2`, against a
 * server of its own; creates a workspace with the admin token, posts `BENCH_SESSIONS` (300) single-message sessions
 * through HTTP with `@resilience/api-client`, 10 at a time (as apps/deriver/bench/drain.ts does), waits for the
 * drain, lets the system idle `BENCH_IDLE_SECONDS` (60), then prints:
 *
 * - the drain time, from the first post to the last item processed;
 * - per statement the apps ran in the drain and the idle period: calls, mean, p99 and max server time, JIT functions;
 * - the idle deriver's claims, the mean server time of one, and what they cost the server an hour.
 *
 * The server: `Cluster.start` of this checkout (`RESILIENCE_POSTGRES_BIN=/usr/lib/postgresql/15/bin` for Debian's
 * 15, unset for the embedded 18), durable like `npm start`'s own server (fsync on), with `pg_stat_statements`
 * (`track = all`, `track_planning = on`) and every statement's duration in a JSON server log
 * (`log_min_duration_statement = 0`, `logging_collector = on`, `log_destination = jsonlog`: PostgreSQL 15 or later).
 * The apps connect as a role of their own (`bench_app`, owner of the fresh database `bench`); the bench's own
 * queries (its poll of the queue, its reads of the statistics) run as the superuser, in no figure.
 *
 *   npm run bench:statements                                                     # the embedded 18
 *   RESILIENCE_POSTGRES_BIN=/usr/lib/postgresql/15/bin npm run bench:statements  # Debian's 15
 *   BENCH_TREE=/tmp/before-fix npm run bench:statements                          # another checkout's apps
 *
 * Another checkout (the commit before a fix) needs a `node_modules` of its own: links to this checkout's entries
 * but `@resilience`, and a copy of `@resilience`, whose links are relative (`../../packages/…`) and so name the
 * other checkout's packages. A link to this checkout's whole `node_modules` would run this checkout's packages
 * under the other one's apps (the bench refuses such a tree):
 *
 *   git worktree add /tmp/before-fix 838d495~1 && mkdir /tmp/before-fix/node_modules
 *   for e in "$PWD"/node_modules/* "$PWD"/node_modules/.[!.]*; do
 *     [ "$(basename "$e")" = @resilience ] || ln -s "$e" /tmp/before-fix/node_modules/; done
 *   cp -a node_modules/@resilience /tmp/before-fix/node_modules/
 *
 * The drain is seen by polling the queue table every 20 ms (as the superuser) until every item is processed, at most
 * `BENCH_DRAIN_SECONDS` (600); the idle period then starts. What no figure here holds: the server's work outside
 * statements, such as a connection's start and authentication (the default `DB_POOL_CLASS=null` connects per
 * checkout). `BENCH_VERBOSE=1` prints the launcher's output as it comes (else its last lines, when something fails).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { ApiClient } from "@resilience/api-client"
import { DbSession } from "@resilience/db-session"
import { Variables } from "@resilience/environment"
import { Cluster, Orphans } from "@resilience/local-postgres"
import { Context, Data, Deferred, Duration, Effect, Layer, Schema } from "effect"
import { FetchHttpClient } from "effect/http"
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync, writeFileSync } from "node:fs"
import { join, resolve, sep } from "node:path"
import { Stats } from "../../../packages/bench-kit/src/index.ts"
import * as AwaitReady from "../src/AwaitReady.ts"
import * as Child from "../src/Child.ts"
import * as PrometheusText from "../src/PrometheusText.ts"
import { repositoryRoot } from "../src/Stack.ts"

const sessions = Number(process.env.BENCH_SESSIONS ?? 300)
const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 60)
const verbose = process.env.BENCH_VERBOSE === "1"
// npm runs the script in packages/launcher: a relative BENCH_TREE is taken from where npm was started
const tree = resolve(process.env.INIT_CWD ?? process.cwd(), process.env.BENCH_TREE ?? repositoryRoot)
/** The tenant schema the launcher serves (its default, unless the environment names another). */
const schema = process.env[Variables.schema] ?? "public"
const clients = 10
const workers = 2
const pollMillis = 20
/** Bounds: the launcher's start (two apps, migrations), the drain (`BENCH_DRAIN_SECONDS`), and the whole run. */
const startSeconds = 180
const drainSeconds = Number(process.env.BENCH_DRAIN_SECONDS ?? 600)
const runSeconds = startSeconds + drainSeconds + idleSeconds + 300
const role = "bench_app"
const database = "bench"
const workspace = "bench"
const readyLine = "database system is ready to accept connections"
const nowMillis = () => performance.timeOrigin + performance.now()

class BenchFailed extends Data.TaggedError("BenchFailed")<{ readonly message: string }> {}

/** The entry point in `tree`, once every `@resilience/*` package the tree's apps import is the tree's own. */
const entryOf = Effect.suspend(() => {
  const entry = join(tree, "packages", "launcher", "src", "bin", "start.ts")
  if (!existsSync(entry)) return Effect.fail(new BenchFailed({ message: `BENCH_TREE=${tree}: no ${entry}` }))
  const links = join(tree, "node_modules", "@resilience")
  if (!existsSync(links)) return Effect.fail(new BenchFailed({ message: `BENCH_TREE=${tree}: no ${links}` }))
  const root = realpathSync(tree) + sep
  const foreign = readdirSync(links)
    .map((name) => `@resilience/${name} → ${realpathSync(join(links, name))}`)
    .filter((line) => !line.slice(line.indexOf("→ ") + 2).startsWith(root))
  return foreign.length === 0 ? Effect.succeed(entry) : Effect.fail(
    new BenchFailed({
      message:
        `BENCH_TREE=${tree}: its apps would import another checkout's packages (${foreign.slice(0, 3).join(", ")}${
          foreign.length > 3 ? `, and ${foreign.length - 3} more` : ""
        }); ` +
        "give it a node_modules of its own (see the top of packages/launcher/bench/statements.ts)"
    })
  )
})

/** The tree's commit, `-dirty` when its files differ from it. */
const revision = (): string => {
  try {
    return execFileSync("git", ["-C", tree, "describe", "--always", "--dirty"], { encoding: "utf8" }).trim()
  } catch {
    return "no git"
  }
}

/**
 * The server's binaries, seen through a directory of the bench's: `Cluster.start` waits for the server's ready line
 * on its output, and with `logging_collector = on` the collector takes that output into the log directory, so the
 * line never comes (the start fails after 60 s). Here `initdb` is the build's, and `postgres` runs the build's and,
 * when it starts a server (`-D …`), copies the ready line to its output once the server has logged it. The script
 * names the build's template key, so another build gets a template of its own.
 */
const loggingBinaries = Effect.fnUntraced(function*(directory: string) {
  const build = yield* Cluster.binaries
  if (build.major < 15) {
    return yield* new BenchFailed({ message: `PostgreSQL ${build.major}: the JSON server log needs 15 or later` })
  }
  mkdirSync(directory, { mode: 0o755 })
  const waitForReady = `until grep -qs "${readyLine}" "$1"/log/*.json; do sleep 0.05; done; ` +
    `echo "${readyLine} (the bench saw it in $1/log)" >&2`
  writeFileSync(
    join(directory, "postgres"),
    [
      "#!/bin/sh",
      `# bench:statements: ${build.postgres} (template ${Cluster.templateKey(build)})`,
      `if [ "$1" = "-D" ]; then (timeout 120 sh -c '${waitForReady}' sh "$2" &); fi`,
      `exec '${build.postgres}' "$@"`,
      ""
    ].join("\n"),
    { mode: 0o755 }
  )
  symlinkSync(build.initdb, join(directory, "initdb"))
  return { directory, major: build.major }
})

/** Runs `effect` with `RESILIENCE_POSTGRES_BIN` naming `directory`, and puts the variable back afterwards. */
const withBinaries = <A, E, R>(directory: string, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const saved = process.env[Cluster.binariesVariable]
      process.env[Cluster.binariesVariable] = directory
      return saved
    }),
    () => effect,
    (saved) =>
      Effect.sync(() => {
        if (saved === undefined) Reflect.deleteProperty(process.env, Cluster.binariesVariable)
        else process.env[Cluster.binariesVariable] = saved
      })
  )

/** Statements on `url` as the superuser, on one connection of its own. */
const superuser = Effect.fnUntraced(function*(url: string) {
  const context = yield* Layer.build(DbSession.layer({
    url,
    connectTimeout: "10 seconds",
    poolClass: "queue",
    poolSize: 1,
    driver: "pg",
    applicationName: "bench-statements"
  })).pipe(Effect.orDie)
  const db = Context.get(context, DbSession)
  return <Row>(text: string, params: ReadonlyArray<unknown> = []) => Effect.orDie(db.query<Row>(text, params))
})

/** One `pg_stat_statements` entry of the apps' role in the run's database. */
interface Statement {
  readonly id: string
  readonly toplevel: boolean
  readonly query: string
  readonly calls: number
  /** Planning + execution, ms (track_planning on). */
  readonly total: number
  /** The largest planning + the largest execution, ms. */
  readonly max: number
  readonly jitFunctions: number
  /** Generation, inlining, optimization, emission (and deforming, from 17), ms. */
  readonly jitMillis: number
}

/** The poll's claim, `SELECT … FROM "<schema>"."queue_claim"(…)` (not the record's, which claims along). */
const isClaim = (statement: Statement) =>
  statement.toplevel && /^SELECT [^;]* FROM \S+queue_claim"?\(/.test(statement.query)

/** A top-level statement in the server log: its query id, when it ended (ms since the epoch) and its duration. */
interface Logged {
  readonly id: string
  readonly at: number
  readonly millis: number
}

const LogEntry = Schema.Struct({
  timestamp: Schema.String,
  user: Schema.optionalKey(Schema.String),
  dbname: Schema.optionalKey(Schema.String),
  session_id: Schema.String,
  error_severity: Schema.String,
  message: Schema.String
})
const decodeLogEntry = Schema.decodeUnknownSync(LogEntry)
const durationLine = /^duration: ([\d.]+) ms {2}(parse|bind|execute|statement)\b/

/**
 * The apps' top-level statements in the JSON server log (`*.json` in `directory`). With the pg driver's extended
 * protocol a statement logs three durations, parse, bind (planning) and execute: it counts as their sum, closed by
 * its execute; a simple-protocol statement (`BEGIN`) logs one. The query id is read from the line's text: as a
 * JSON number it would lose digits.
 */
const logged = (directory: string): ReadonlyArray<Logged> => {
  const open = new Map<string, number>()
  const statements: Array<Logged> = []
  const files = readdirSync(directory).filter((file) => file.endsWith(".json")).sort()
  for (const line of files.flatMap((file) => readFileSync(join(directory, file), "utf8").split("\n"))) {
    if (!line.startsWith("{") || !line.endsWith("}")) continue
    const entry = decodeLogEntry(JSON.parse(line))
    if (entry.user !== role || entry.dbname !== database) continue
    if (entry.error_severity !== "LOG") open.delete(entry.session_id)
    const match = durationLine.exec(entry.message)
    if (match === null) continue
    const millis = (open.get(entry.session_id) ?? 0) + Number(match[1])
    if (match[2] === "parse" || match[2] === "bind") {
      open.set(entry.session_id, millis)
      continue
    }
    open.delete(entry.session_id)
    statements.push({
      id: /"query_id":(-?\d+)/.exec(line)?.[1] ?? "0",
      at: Date.parse(entry.timestamp.replace(" ", "T").replace(" UTC", "Z")),
      millis
    })
  }
  return statements
}

const ms = (n: number | undefined) => n === undefined || Number.isNaN(n) ? "?" : n < 10 ? n.toFixed(3) : n.toFixed(1)
const grouped = (n: number) => Math.round(n).toLocaleString("en-US")
const seconds = (millis: number) => `${(millis / 1000).toFixed(2)} s`
const oneLine = (query: string, width: number) => {
  const line = query.replace(/\s+/g, " ").trim().replaceAll("|", "\\|")
  return (line.length > width ? `${line.slice(0, width - 1)}…` : line).padEnd(width)
}

/** A statement's figures: see {@link legend}. */
interface Figures {
  readonly statement: Statement
  readonly logged: boolean
  readonly mean: number | undefined
  readonly p99: number | undefined
  readonly max: number
  readonly total: number
}

const legend =
  `top-level: mean, p99 and max from the server log, a statement's time the sum of its parse, bind and execute
durations (the pg driver's extended protocol) or its one duration (simple protocol); calls and JIT functions from
pg_stat_statements (the apps' role in the run's database). nested (inside a function, track = all; its time is also
its caller's): pg_stat_statements, planning + execution (track_planning on), max the largest planning + the largest
execution; 0 calls: planned, never run. ?: no log line of its own (sent in one simple query with the next statement,
whose row has the query's duration): pg_stat_statements' mean and max.`

/** Per statement, by total server time. */
const figures = (statements: ReadonlyArray<Statement>, log: ReadonlyArray<Logged>): ReadonlyArray<Figures> => {
  const byId = Map.groupBy(log, (statement) => statement.id)
  return statements.map((statement): Figures => {
    const times = statement.toplevel ? (byId.get(statement.id) ?? []).map((logged) => logged.millis) : []
    if (times.length === 0) {
      const mean = statement.calls > 0 ? statement.total / statement.calls : undefined
      return { statement, logged: false, mean, p99: undefined, max: statement.max, total: statement.total }
    }
    const total = times.reduce((sum, millis) => sum + millis, 0)
    const max = times.reduce((most, millis) => Math.max(most, millis), 0)
    return { statement, logged: true, mean: total / times.length, p99: Stats.quantile(times, 0.99), max, total }
  }).sort((a, b) => b.total - a.total)
}

const table = (rows: ReadonlyArray<Figures>): string => {
  const cells = (values: ReadonlyArray<string>) => `| ${values.join(" | ")} |`
  return [
    cells(["statement (first 70 characters)".padEnd(70), "level", "calls", "mean ms", "p99 ms", "max ms", "JIT fns"]),
    cells(["---", "---", "--:", "--:", "--:", "--:", "--:"]),
    ...rows.map(({ logged, max, mean, p99, statement }) =>
      cells([
        oneLine(statement.query, 70),
        statement.toplevel ? "top" : "nested",
        grouped(statement.calls),
        mean === undefined ? "—" : ms(mean),
        statement.toplevel ? (logged ? ms(p99) : "?") : "—",
        ms(max),
        grouped(statement.jitFunctions)
      ])
    )
  ].join("\n")
}

const sum = <A>(values: ReadonlyArray<A>, of: (value: A) => number) =>
  values.reduce((total, value) => total + of(value), 0)

const program = Effect.gen(function*() {
  const entry = yield* entryOf
  const directory = yield* Effect.acquireRelease(
    Effect.sync(() => Orphans.makeDirectory("bench-statements")),
    (directory) => Effect.sync(() => Orphans.remove(directory))
  )
  const binaries = yield* loggingBinaries(join(directory, "bin"))
  console.log(`starting PostgreSQL ${binaries.major} in ${directory}/server`)
  const cluster = yield* withBinaries(
    binaries.directory,
    Cluster.start({
      // kept (not a throw-away server's fsync = off): durable, as npm start's own server and Debian's are
      directory: join(directory, "server"),
      ownProcessGroup: true,
      preload: ["pg_stat_statements"],
      settings: {
        "pg_stat_statements.track": "all",
        "pg_stat_statements.track_planning": "on",
        log_min_duration_statement: "0",
        logging_collector: "on",
        log_destination: "jsonlog",
        log_timezone: "UTC",
        log_rotation_age: "0",
        log_rotation_size: "0"
      }
    })
  )
  const admin = yield* superuser(cluster.url)
  const password = randomBytes(12).toString("hex")
  yield* admin("CREATE EXTENSION pg_stat_statements")
  yield* admin(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`)
  yield* admin(`CREATE DATABASE ${database} OWNER ${role}`)
  const [server] = yield* admin<{ version: string; jit: string; jitAvailable: boolean; number: number }>(
    `SELECT version() AS version, current_setting('jit') AS jit, pg_jit_available() AS "jitAvailable",
            current_setting('server_version_num')::int AS number`
  )
  const { jit, jitAvailable, number, version } = server!
  /** The server's clock (ms since the epoch) and the connections made to the run's database so far. */
  const serverNow = Effect.map(
    admin<{ at: number; sessions: number }>(
      `SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS at,
              (SELECT sessions::float8 FROM pg_stat_database WHERE datname = $1) AS sessions`,
      [database]
    ),
    (rows) => rows[0]!
  )
  const statements = admin<Statement>(
    `SELECT queryid::text AS id, toplevel, query, calls::float8 AS calls,
            total_plan_time + total_exec_time AS total, max_plan_time + max_exec_time AS max,
            jit_functions::float8 AS "jitFunctions",
            jit_generation_time + jit_inlining_time + jit_optimization_time + jit_emission_time
              ${number >= 170000 ? "+ jit_deform_time" : ""} AS "jitMillis"
     FROM pg_stat_statements
     WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
       AND userid = (SELECT oid FROM pg_roles WHERE rolname = $2)`,
    [database, role]
  )
  const monitor = yield* superuser(Cluster.urlFor(cluster, database))
  const queue = monitor<{ total: number; pending: number; dead: number; last: number | null }>(
    `SELECT count(*)::int AS total, count(*) FILTER (WHERE NOT processed)::int AS pending,
            count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
            extract(epoch FROM max(processed_at))::float8 * 1000 AS last
     FROM "${schema.replaceAll("\"", "\"\"")}".queue`
  ).pipe(Effect.map((rows) => rows[0]!))

  // npm start, as a user runs it, on the run's database
  const apiPort = yield* Cluster.freePort
  const metricsPort = yield* Cluster.freePort
  const apiUrl = `http://127.0.0.1:${apiPort}`
  const deriverUrl = `http://127.0.0.1:${metricsPort}`
  const adminToken = randomBytes(24).toString("base64url")
  const output: Array<string> = []
  const warnings: Array<string> = []
  const banner = yield* Deferred.make<void>()
  console.log(`starting ${entry} (${revision()})`)
  const launcher = yield* Child.start({
    name: "launcher",
    entry,
    env: {
      [Variables.database.url]: Cluster.urlFor({ ...cluster, user: role, password }, database),
      [Variables.api.adminToken]: adminToken,
      [Variables.deriver.workers]: String(workers),
      [Variables.api.port]: String(apiPort),
      [Variables.deriverApp.metricsPort]: String(metricsPort),
      // where the launcher keeps its demo workspace's token: not the tree's .data, for a database that goes away
      RESILIENCE_DATA_DIR: join(directory, "launcher")
    },
    onLine: (_, line) => {
      if (verbose) console.log(line)
      if (/\b(WARN|ERROR|FATAL)\b/.test(line)) warnings.push(line)
      output.push(line)
      if (output.length > 200) output.shift()
      // the banner's first line: the launcher has made its demo workspace, so no write of its own comes later
      if (line === "ready") Deferred.doneUnsafe(banner, Effect.void)
    }
  })

  const measure = Effect.gen(function*() {
    yield* Effect.gen(function*() {
      yield* AwaitReady.wait({ child: launcher, check: yield* AwaitReady.api(apiUrl) })
      yield* AwaitReady.wait({ child: launcher, check: yield* AwaitReady.deriver(deriverUrl) })
      yield* Deferred.await(banner)
    }).pipe(Effect.timeoutOrElse({
      duration: Duration.seconds(startSeconds),
      orElse: () => Effect.fail(new BenchFailed({ message: `npm start not ready within ${startSeconds} s` }))
    }))
    const api = yield* ApiClient.make({ baseUrl: apiUrl }).pipe(Effect.orDie)

    // the window every figure covers: from just before the first post to the end of the idle period
    yield* admin("SELECT pg_stat_statements_reset()")
    const { at: windowStart } = yield* serverNow
    const created = yield* Effect.orDie(api.createWorkspace({ adminToken, name: workspace }))
    console.log(`posting ${sessions} single-message sessions through the API, ${clients} at a time…`)
    const firstPost = nowMillis()
    yield* Effect.forEach(
      Array.from({ length: sessions }, (_, i) => `s${i}`),
      (session) =>
        api.appendMessages({
          token: created.token,
          workspace,
          session,
          messages: [{ peer: "alice", content: `message of ${session}` }]
        }),
      { concurrency: clients, discard: true }
    ).pipe(Effect.orDie)
    const lastPost = nowMillis()
    // every item processed (or a dead letter), seen by polling the queue table as the superuser
    let state = yield* queue
    while (!(state.total >= sessions && state.pending === state.dead) && nowMillis() < lastPost + drainSeconds * 1000) {
      yield* Effect.sleep(Duration.millis(pollMillis))
      state = yield* queue
    }
    const drainedAt = nowMillis()
    const drained = state.total >= sessions && state.pending === state.dead

    console.log(`idling ${idleSeconds} s…`)
    const metrics = Effect.map(PrometheusText.scrape(`${deriverUrl}/metrics`), (text) => ({
      polls: PrometheusText.sample(text, "deriver_polls_total"),
      empty: PrometheusText.sample(text, "deriver_polls_total", "result=\"empty\"")
    }))
    const idleStart = { ...yield* serverNow, rows: yield* statements, metrics: yield* metrics }
    yield* Effect.sleep(Duration.seconds(idleSeconds))
    const idleEnd = { ...yield* serverNow, rows: yield* statements, metrics: yield* metrics }
    const left = yield* queue
    const log = logged(join(cluster.directory, "data", "log"))
      .filter((statement) => statement.at >= windowStart && statement.at <= idleEnd.at)
    return { firstPost, lastPost, drainedAt, drained, state, idleStart, idleEnd, log, left }
  })
  const run = yield* Effect.raceFirst(measure, Deferred.await(launcher.exited)).pipe(
    Effect.tapCause(() => Effect.sync(() => console.error(`\nthe launcher's last lines:\n${output.join("\n")}\n`)))
  )

  // the report
  const rows = figures(run.idleEnd.rows, run.log)
  const idleMillis = run.idleEnd.at - run.idleStart.at
  const inIdle = (statement: Logged) => statement.at > run.idleStart.at && statement.at <= run.idleEnd.at
  const claimsOf = (statements: ReadonlyArray<Statement>) => statements.filter(isClaim)
  const idleClaims = sum(claimsOf(run.idleEnd.rows), (row) => row.calls) -
    sum(claimsOf(run.idleStart.rows), (row) => row.calls)
  const idleClaimsPss = (sum(claimsOf(run.idleEnd.rows), (row) => row.total) -
    sum(claimsOf(run.idleStart.rows), (row) => row.total)) / idleClaims
  const claimIds = new Set(claimsOf(run.idleEnd.rows).map((row) => row.id))
  const idleLogged = run.log.filter((statement) => claimIds.has(statement.id) && inIdle(statement))
  const idleClaimMean = sum(idleLogged, (statement) => statement.millis) / idleLogged.length
  const claimsPerHour = idleClaims * 3_600_000 / idleMillis
  const idleAll = run.log.filter(inIdle)
  const unlogged = rows.filter((row) => row.statement.toplevel && !row.logged)
  const polls = run.idleEnd.metrics.polls - run.idleStart.metrics.polls
  const emptyPolls = run.idleEnd.metrics.empty - run.idleStart.metrics.empty

  console.log(`
${version}
jit = ${jit}${jitAvailable ? "" : " (no JIT provider)"}; pg_stat_statements.track = all, track_planning = on; \
every statement logged (log_min_duration_statement = 0)
tree ${tree} (${revision()}): npm start's defaults but ${Variables.deriver.workers}=${workers}; a durable server (fsync on)

drain: ${sessions} single-message sessions posted through the API, ${clients} at a time; posting took ${
    seconds(run.lastPost - run.firstPost)
  }; first post → last item processed: ${run.drained ? "" : "NOT DRAINED, gave up after "}${
    seconds(run.drainedAt - run.firstPost)
  } (seen by a poll of the queue table every ${pollMillis} ms; by the items' processed_at: ${
    run.state.last === null ? "?" : seconds(run.state.last - run.firstPost)
  }); ${run.state.total} items, ${run.state.pending - run.state.dead} pending, ${run.state.dead} dead letters

the apps' statements over the drain and ${idleSeconds} s idle:
${table(rows)}

${legend}
log against pg_stat_statements: ${grouped(run.log.length)} \
top-level statements logged, ${grouped(sum(run.idleEnd.rows.filter((row) => row.toplevel), (row) => row.calls))} \
called (${grouped(sum(unlogged, (row) => row.statement.calls))} without a log line of their own)
JIT over the run: ${grouped(sum(run.idleEnd.rows, (row) => row.jitFunctions))} functions, ${
    ms(sum(run.idleEnd.rows, (row) => row.jitMillis))
  } ms

${
    run.drained ?
      "" :
      `NOT IDLE: ${run.state.pending - run.state.dead} items were pending when the period began, ${
        run.left.pending - run.left.dead
      } when it ended\n`
  }idle ${seconds(idleMillis)}: ${idleClaims} claims (pg_stat_statements delta; ${idleLogged.length} in the log; \
the deriver counted ${polls} polls, ${emptyPolls} empty); ${
    run.idleEnd.sessions - run.idleStart.sessions
  } connections made to the database (pg_stat_database; a connection's start is in no figure here)
mean server time of an idle claim: ${ms(idleClaimMean)} ms, p99 ${
    ms(Stats.quantile(idleLogged.map((statement) => statement.millis), 0.99))
  } ms (log; pg_stat_statements: ${ms(idleClaimsPss)} ms of planning + execution)
idle deriver's server time: ${grouped(claimsPerHour)} claims an hour × ${ms(idleClaimMean)} ms = ${
    grouped(claimsPerHour * idleClaimMean)
  } ms an hour
claims at (s into the idle period): ${
    idleLogged.map((statement) => ((statement.at - run.idleStart.at) / 1000).toFixed(1)).join(" ")
  }
every statement of the apps in the idle period: ${idleAll.length} top-level, ${
    ms(sum(idleAll, (statement) => statement.millis))
  } ms (log) → ${grouped(sum(idleAll, (statement) => statement.millis) * 3_600_000 / idleMillis)} ms an hour
the launcher's and the apps' warnings and errors: ${warnings.length}${
    warnings.slice(0, 5).map((line) => `\n  ${line.slice(0, 300)}`).join("")
  }
`)
})

NodeRuntime.runMain(
  Effect.scoped(program.pipe(Effect.timeoutOrElse({
    duration: Duration.seconds(runSeconds),
    orElse: () => Effect.fail(new BenchFailed({ message: `the run took more than ${runSeconds} s` }))
  }))).pipe(Effect.provide(FetchHttpClient.layer))
)
