/**
 * Two versions live: the previous release's API and deriver beside the current ones on one tenant schema, in the
 * order a rollout makes them meet (docs/deploy.md, "Rollout order"), every write recorded and reconciled by the
 * checker. Against one PostgreSQL, one schema:
 *
 * 0. the previous release alone: its `migrate`, its API and deriver; writes through its API;
 * 1. the current apps on the schema as the previous release left it, before the current migrations run (a pod
 *    of the new release started before the migration Job finished): with nothing pending they serve, writes go
 *    through both APIs; with migrations pending they must wait, not break: `/readyz` 503 on both, a write
 *    through the current API answered 503 with `Retry-After` (recorded as refused: the gate answers without a
 *    checkout, so it must not be stored), while the previous API keeps acknowledging; then they stop;
 * 2. the current `migrate` (the Job) on the populated schema, the previous release's apps still running on
 *    the migrated schema, alone: writes through the previous API, derived by the previous deriver;
 * 3. both releases: the current apps started again beside the previous ones, writes through both APIs, both
 *    derivers claiming; then every app stops on SIGTERM with exit code 0.
 *
 * After phases 1, 2 and 3 the checker reconciles the whole history (every write stored once, derived once, no
 * gap, every queue item processed without error) and every write meant to be acknowledged must have been: a
 * migration an older writer cannot live with (a NOT NULL column it does not fill) fails phase 2, one that
 * cannot run on a populated schema fails its `migrate`. Nothing here names a table or a migration: it runs
 * whatever the current migrations are against whatever the previous release was.
 *
 * @since 0.1.0
 */
import { ApiClient } from "@resilience/api-client"
import { Checker, ClientWrites, History } from "@resilience/checker"
import { Classify, DbSession } from "@resilience/db-session"
import { Domain } from "@resilience/domain"
import { Cluster } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Data, Effect, Layer } from "effect"
import type { Scope } from "effect"
import { FetchHttpClient } from "effect/http"
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, openSync, readFileSync } from "node:fs"
import { join } from "node:path"

/**
 * One release's three entry points (`migrate`, the API, the deriver) and the node arguments they run with.
 *
 * @since 0.1.0
 * @category models
 */
export interface Release {
  readonly label: string
  readonly migrate: string
  readonly api: string
  readonly deriver: string
  readonly nodeArgs: ReadonlyArray<string>
}

/**
 * A release's tree built under `dir` (its apps' `dist/`, importing the packages' `dist/`), run as the image
 * runs them: plain node, no source condition.
 *
 * @since 0.1.0
 * @category constructors
 */
export const built = (label: string, dir: string): Release => ({
  label,
  migrate: join(dir, "apps/api/dist/migrate.js"),
  api: join(dir, "apps/api/dist/main.js"),
  deriver: join(dir, "apps/deriver/dist/main.js"),
  nodeArgs: []
})

/**
 * This workspace's apps, from their sources.
 *
 * @since 0.1.0
 * @category constructors
 */
export const workspace = (root: string): Release => ({
  label: "current",
  migrate: join(root, "apps/api/src/migrate.ts"),
  api: join(root, "apps/api/src/main.ts"),
  deriver: join(root, "apps/deriver/src/main.ts"),
  nodeArgs: ["--conditions=@resilience/source"]
})

/**
 * The run failed: which phase, what was wrong.
 *
 * @since 0.1.0
 * @category errors
 */
export class TwoVersionsFailed extends Data.TaggedError("TwoVersionsFailed")<{
  readonly phase: string
  readonly reason: string
}> {
  override get message() {
    return `${this.phase}: ${this.reason}`
  }
}

/**
 * What a run needs: the two releases, a folder for the apps' logs, writes per batch.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly previous: Release
  readonly current: Release
  readonly logs: string
  /** Writes per batch and API (default 24). */
  readonly writes?: number | undefined
  readonly log?: ((line: string) => void) | undefined
}

interface Running {
  readonly name: string
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  readonly port: number
}

/** Children still running when this process exits (a failure, a closed pipe) are killed with it. */
const children = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL")
})

const schemaName = "two_versions"
const adminToken = "two-versions-admin-token"

const logTail = (logs: string, name: string) => {
  try {
    return readFileSync(join(logs, `${name}.log`), "utf8").trim().split("\n").slice(-15).join("\n")
  } catch {
    return "(no log)"
  }
}

/**
 * Runs the four phases (see the module comment); fails with {@link TwoVersionsFailed} naming the first phase
 * that went wrong, with the apps' last log lines.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: Options): Effect.Effect<void, TwoVersionsFailed, Scope.Scope> =>
  Effect.gen(function*() {
    const log = options.log ?? ((line: string) => console.log(`two-versions: ${line}`))
    const writes = options.writes ?? 24
    const cluster = yield* Cluster.start({ maxConnections: 100 })
    const url = Cluster.urlFor(cluster, "postgres")
    const schema = SchemaName.makeUnsafe(schemaName)
    const db = yield* Layer.build(DbSession.layer({
      url,
      connectTimeout: "5 seconds",
      poolClass: "queue",
      poolSize: 2,
      driver: "pg",
      applicationName: "two-versions-checker"
    })).pipe(Effect.orDie)
    const history = History.make()
    let phase = "setup"
    const failure = (reason: string) => new TwoVersionsFailed({ phase, reason })

    const env = (name: string, extra: Record<string, string>): NodeJS.ProcessEnv => ({
      PATH: process.env["PATH"] ?? "/usr/bin:/bin",
      HOME: process.env["HOME"] ?? "/tmp",
      DATABASE_URL: url,
      DB_SCHEMA: schemaName,
      DB_APPLICATION_NAME: name,
      API_HOST: "127.0.0.1",
      API_ADMIN_TOKEN: adminToken,
      API_MIGRATE: "false",
      DERIVER_MIGRATE: "false",
      DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0.2",
      DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "1",
      OTEL_SDK_DISABLED: "true",
      ...extra
    })

    const migrate = (release: Release) =>
      Effect.gen(function*() {
        const name = `${release.label}-migrate`
        const code = yield* Effect.promise(() =>
          new Promise<number | null>((resolve) => {
            const out = openSync(join(options.logs, `${name}.log`), "a")
            const child = spawn(process.execPath, [...release.nodeArgs, release.migrate], {
              env: env(name, {}),
              stdio: ["ignore", out, out]
            })
            child.on("exit", (exitCode) => {
              closeSync(out)
              resolve(exitCode)
            })
          })
        )
        const said = logTail(options.logs, name).split("\n").at(-1) ?? ""
        if (code !== 0) return yield* failure(`${name} exited ${code}: ${logTail(options.logs, name)}`)
        log(`${name}: ${said}`)
      })

    const start = (release: Release, app: "api" | "deriver", generation: number) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          const port = yield* Cluster.freePort
          const name = `${release.label}-${app}-${generation}`
          const out = openSync(join(options.logs, `${name}.log`), "a")
          const child = spawn(process.execPath, [...release.nodeArgs, app === "api" ? release.api : release.deriver], {
            env: env(name, app === "api" ? { API_PORT: String(port) } : { DERIVER_METRICS_PORT: String(port) }),
            stdio: ["ignore", out, out]
          })
          children.add(child)
          const exited = new Promise<number | null>((resolve) =>
            child.on("exit", (code) => {
              children.delete(child)
              closeSync(out)
              resolve(code)
            })
          )
          return { name, child, exited, port } satisfies Running
        }),
        (running) => Effect.promise(() => stopProcess(running))
      )

    const stopProcess = async (running: Running) => {
      if (running.child.exitCode !== null) return running.child.exitCode
      running.child.kill("SIGTERM")
      const timer = setTimeout(() => running.child.kill("SIGKILL"), 20_000)
      const code = await running.exited
      clearTimeout(timer)
      return code
    }

    const stop = (running: Running) =>
      Effect.gen(function*() {
        const code = yield* Effect.promise(() => stopProcess(running))
        if (code !== 0) {
          return yield* failure(`${running.name} exited ${code} on SIGTERM: ${logTail(options.logs, running.name)}`)
        }
        log(`${running.name} stopped on SIGTERM, exit 0`)
      })

    const statusOf = (port: number, path: string, init?: RequestInit) =>
      Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}${path}`, { ...init, signal: AbortSignal.timeout(5_000) }).then(
          async (response) => ({
            status: response.status,
            retryAfter: response.headers.get("retry-after"),
            body: await response.text()
          }),
          () => ({ status: 0, retryAfter: null, body: "" })
        )
      )

    const until = (running: Running, path: string, want: number) =>
      Effect.gen(function*() {
        let last = 0
        for (let attempt = 0; attempt < 600; attempt++) {
          if (running.child.exitCode !== null) {
            return yield* failure(
              `${running.name} exited ${running.child.exitCode}: ${logTail(options.logs, running.name)}`
            )
          }
          last = (yield* statusOf(running.port, path)).status
          if (last === want) return
          yield* Effect.sleep("100 millis")
        }
        return yield* failure(`${running.name} ${path} answered ${last}, expected ${want}`)
      })

    const clientOf = (running: Running) =>
      ApiClient.make({
        baseUrl: `http://127.0.0.1:${running.port}`,
        maxAttempts: 10,
        maxDelay: "2 seconds",
        budget: { maxTokens: 1_000, ratio: 1 }
      }).pipe(Effect.orDie)

    let token = ""
    let written = 0
    /** `count` writes through `api` (4 at a time), recorded; fails unless every one was acknowledged. */
    const writeThrough = (api: Running, label: string, count: number) =>
      Effect.gen(function*() {
        const client = yield* clientOf(api)
        const first = written
        written += count
        const outcomes = yield* Effect.forEach(Array.from({ length: count }, (_, i) => first + i), (n) => {
          const request = {
            client: api.name,
            workspace: "acme",
            session: `s${n % 3}`,
            peer: `p${n % 4}`,
            content: `${label} message ${n} about lanterns, harbors and tides`
          }
          return ClientWrites.append(client, history, token, request).pipe(
            Effect.as("acknowledged"),
            Effect.catch((error) => Effect.succeed(`${error._tag}: ${error.message}`))
          )
        }, { concurrency: 4 })
        const failed = outcomes.filter((o) => o !== "acknowledged")
        if (failed.length > 0) {
          return yield* failure(
            `${failed.length} of ${count} writes through ${api.name} not acknowledged, e.g. ${failed[0]}\n${
              logTail(options.logs, api.name)
            }`
          )
        }
        log(`${count} writes through ${api.name} (${label}): all acknowledged`)
      })

    /**
     * Settles and reconciles the whole history. `olderSchema`: the schema is still the previous release's, which
     * this tree's checker may not be able to read (a table or column it reads came with a pending migration:
     * 42P01, 42703); then the verdict waits for the next phase, which reconciles the same writes.
     */
    const verdict = (label: string, olderSchema = false) =>
      Effect.gen(function*() {
        const backlog = yield* Checker.settle(schema, history, "60 seconds")
        const result = yield* Checker.reconcile(schema, history)
        log(`checker, ${label}:\n${Checker.table(result)}`)
        if (backlog > 0 || !result.valid) {
          return yield* failure(`the checker found anomalies (${backlog} queue items left)`)
        }
      }).pipe(
        Effect.provide(db),
        Effect.catch((e) => {
          if (e._tag === "TwoVersionsFailed") return Effect.fail(e)
          // A table or column this checker reads that the older schema lacks: db-session's table calls it
          // misconfiguration (a schema not migrated, a version skew), which is what phase 1 is.
          if (olderSchema && Classify.isMisconfigured(e)) {
            return Effect.sync(() =>
              log(`checker, ${label}: deferred to the next phase: this checker reads the current schema (${e.message})`)
            )
          }
          return Effect.fail(failure(`the checker: ${e.message}`))
        })
      )

    const timed = <A, E, R>(label: string, effect: Effect.Effect<A, E, R>) =>
      Effect.gen(function*() {
        phase = label
        const started = Date.now()
        const result = yield* effect
        log(`${label}: ${((Date.now() - started) / 1000).toFixed(1)} s`)
        return result
      })

    const { current, previous } = options
    log(
      `previous release ${previous.label} (${previous.api}), current (${current.api}); PostgreSQL on port ${cluster.port}`
    )

    // 0. The previous release alone, as it runs today.
    const [previousApi, previousDeriver] = yield* timed(
      `phase 0: release ${previous.label} alone`,
      Effect.gen(function*() {
        yield* migrate(previous)
        const api = yield* start(previous, "api", 1)
        const deriver = yield* start(previous, "deriver", 1)
        yield* until(api, "/readyz", 200)
        yield* until(deriver, "/readyz", 200)
        const admin = yield* clientOf(api)
        const created = yield* admin.createWorkspace({ adminToken, name: "acme" }).pipe(
          Effect.mapError((e) => failure(`creating the workspace: ${e.message}`))
        )
        token = created.token
        yield* writeThrough(api, `release ${previous.label}`, writes)
        return [api, deriver] as const
      })
    )

    /** The current apps, once ready, and the previous API take writes at the same time. */
    const besideThePrevious = (api: Running, deriver: Running, label: string) =>
      Effect.gen(function*() {
        yield* until(api, "/readyz", 200)
        yield* until(deriver, "/readyz", 200)
        yield* Effect.all([
          writeThrough(api, label, writes),
          writeThrough(previousApi, `release ${previous.label} beside current`, writes)
        ], { concurrency: 2 })
      })

    // 1. The current apps on the schema as the previous release left it.
    yield* timed(
      `phase 1: current apps on release ${previous.label}'s schema, before the current migrations`,
      Effect.gen(function*() {
        const pending = yield* Migrator.pending(schema, Domain.components).pipe(
          Effect.provide(db),
          Effect.mapError((e) => failure(`counting pending migrations: ${e.message}`))
        )
        const api = yield* start(current, "api", 1)
        const deriver = yield* start(current, "deriver", 1)
        if (pending === 0) {
          log("no current migration is pending: the current apps serve the previous release's schema")
          yield* besideThePrevious(api, deriver, "current on the old schema")
        } else {
          log(`${pending} current migration(s) pending: the current apps must wait (503), not break`)
          yield* until(api, "/healthz", 200)
          yield* until(api, "/readyz", 503)
          yield* until(deriver, "/readyz", 503)
          const request = {
            client: api.name,
            workspace: "acme",
            session: "s0",
            peer: "p0",
            content: `current before its migrations, message ${written++}`
          }
          const index = history.invoke(request)
          const answer = yield* statusOf(api.port, `/v1/workspaces/acme/sessions/s0/messages`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({ messages: [{ peer: request.peer, content: request.content }] })
          })
          history.complete(index, "refused", `status ${answer.status}`)
          if (answer.status !== 503 || answer.retryAfter === null) {
            return yield* failure(
              `a write through ${api.name} before its migrations answered ${answer.status} (Retry-After ${answer.retryAfter}), expected 503 with Retry-After: ${answer.body}`
            )
          }
          log(
            `${api.name}: /readyz 503, a write answered 503 with Retry-After ${answer.retryAfter} s; ${deriver.name}: /readyz 503`
          )
          yield* writeThrough(previousApi, `release ${previous.label} while current waits`, writes)
        }
        yield* verdict(`current apps on release ${previous.label}'s schema`, pending > 0)
        yield* stop(api)
        yield* stop(deriver)
      }).pipe(Effect.scoped)
    )

    // 2. The current migrations (the Job), then the previous release alone on the migrated schema.
    yield* timed(
      `phase 2: release ${previous.label} on the current schema, after the current migrations`,
      Effect.gen(function*() {
        yield* migrate(current)
        yield* writeThrough(previousApi, `release ${previous.label} on the current schema`, writes)
        yield* verdict(`release ${previous.label}'s API and deriver on the current schema`)
      })
    )

    // 3. Both releases at once, as during the Deployments' roll.
    yield* timed(
      `phase 3: both releases`,
      Effect.gen(function*() {
        const api = yield* start(current, "api", 2)
        const deriver = yield* start(current, "deriver", 2)
        yield* besideThePrevious(api, deriver, "current beside the previous release")
        yield* verdict("both releases' APIs and derivers together")
        for (const running of [previousDeriver, previousApi, deriver, api]) yield* stop(running)
      })
    )
  }).pipe(
    Effect.provide(FetchHttpClient.layer),
    Effect.catchTag(
      "ServerStartFailed",
      (e) => Effect.fail(new TwoVersionsFailed({ phase: "setup", reason: `PostgreSQL did not start: ${e.message}` }))
    )
  )
