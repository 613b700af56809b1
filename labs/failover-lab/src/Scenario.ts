/**
 * One failover scenario, end to end: a fresh Patroni cluster (`synchronous_mode` on or off), the API and the
 * deriver as processes through HAProxy, a workspace, open-loop writes; after a warm-up the fault (a planned
 * switchover, or `kill -9` of the leader's postmaster); then the wait until a new leader serves and the old
 * primary streams from it again as a replica; a little more traffic; the queue drained; the consistency
 * checker's verdict. Every
 * process stops and every directory goes with the scope, and the run is bounded by `deadlineSeconds`.
 */
import { ApiClient } from "@resilience/api-client"
import { Checker } from "@resilience/checker"
import { DbSession } from "@resilience/db-session"
import * as Stack from "@resilience/launcher/Stack"
import { Cluster } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { Clock, Data, Deferred, Duration, Effect, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import pg from "pg"
import * as History from "./History.ts"
import * as PatroniCluster from "./PatroniCluster.ts"
import type * as SystemPackages from "./SystemPackages.ts"
import * as Topology from "./Topology.ts"
import * as Traffic from "./Traffic.ts"

/**
 * The faults: a planned switchover; `kill -9` of the leader's postmaster; and `stall-then-loss`, the
 * synchronous standby stopped (`SIGSTOP`, sockets left open) for `stallSeconds`, then the leader's machine
 * lost (`kill -9` of its Patroni and its postmaster: the leader key expires after Patroni's `ttl`) and the
 * standby let go on; once the standby leads, the old primary's Patroni starts again and rejoins.
 * `stall-cancel-promote`: the same stall, with a watchdog on the leader cancelling every commit that waits for
 * the standby (`pg_cancel_backend`, as a job that cancels long statements does: PostgreSQL then answers the
 * `COMMIT` with success and a WARNING, the commit done on the leader alone); then the leader's machine lost, the
 * standby's replication connection cut (`kill -9` of its WAL receiver, so the WAL still in its socket is gone
 * as it would be with the network), the standby let go on, and `synchronous_mode` turned off
 * (`patronictl edit-config`) as an operator ending the outage would, so that Patroni promotes the standby:
 * whatever the leader alone had is gone once it rejoins.
 */
export const faults = ["switchover", "primary-loss", "stall-then-loss", "stall-cancel-promote"] as const
export type Fault = (typeof faults)[number]

/** One scenario's settings. */
export interface Settings {
  readonly fault: Fault
  readonly synchronousMode: boolean
  /** Patroni's `synchronous_mode_strict` (with `synchronousMode`). */
  readonly strict: boolean
  /** Writes per second. */
  readonly rate: number
  /** Seconds of traffic before the fault. */
  readonly warmupSeconds: number
  /** How long `stall-then-loss` stops the standby before it kills the leader. */
  readonly stallSeconds: number
  /** Seconds of traffic after the old primary has rejoined. */
  readonly afterSeconds: number
  readonly peers: number
  /** 0: each write its own session. */
  readonly sessions: number
  /** The whole scenario (cluster start to verdict) is cut off after this long. */
  readonly deadlineSeconds: number
}

/** Defaults: 20 writes/s over 4 sessions × 4 peers, 4 s before the fault, 3 s after the rejoin. */
export const defaults = {
  rate: 20,
  warmupSeconds: 4,
  afterSeconds: 3,
  /** Longer than the apps' statement timeout (10 s here). */
  stallSeconds: 14,
  strict: false,
  peers: 4,
  sessions: 4,
  deadlineSeconds: 420
} as const

/** A finished scenario. */
export interface Result {
  readonly settings: Settings
  readonly figures: History.Figures
  /** The consistency checker's verdict (`@resilience/checker`). */
  readonly verdict: Checker.Verdict
  /** Fault → Patroni reports the other member as the running leader (or the old one again, `failedOver` false), ms. */
  readonly newLeaderMillis: number
  /** Whether the other member took over (false: the old primary came back as the leader). */
  readonly failedOver: boolean
  /** Fault → the old primary streams from the new leader on its timeline, ms. */
  readonly rejoinedMillis: number
  /** Fault → the fault's command completed (`patronictl switchover` returned; the kill is immediate), ms. */
  readonly faultDoneMillis: number
  /** Answers per second from a second before the fault. */
  readonly timeline: ReturnType<typeof History.timeline>
  /** The members after the rejoin, as Patroni reports them. */
  readonly members: string
  /** API and deriver processes that exited during the run (each would have needed a restart). */
  readonly processesExited: number
  /**
   * The API's own account of its answers at the end (its `/metrics`): admissions and sheds by reason, failed
   * checkouts by reason, error responses by status.
   */
  readonly apiCounters: ReadonlyArray<string>
  /** HAProxy's server state changes after the fault, ms from the fault. */
  readonly routing: ReadonlyArray<string>
}

/** A scenario that could not run to its verdict (a part did not start, an operation failed). */
export class ScenarioFailed extends Data.TaggedError("ScenarioFailed")<{ readonly detail: string }> {
  override get message(): string {
    return this.detail
  }
}

const schema = SchemaName.makeUnsafe("failover")
const adminToken = "failover-lab-admin-token"

const elapsed = (since: number) => Effect.map(Clock.currentTimeMillis, (now) => now - since)

const counted = ["admission_shed_total", "db_acquisitions_total", "api_error_responses_total"]

/** The samples of the counters that say why the API answered 503, from its `/metrics`. */
const apiCountersOf = (apiUrl: string) =>
  Effect.tryPromise(() => fetch(`${apiUrl}/metrics`).then((response) => response.text())).pipe(
    Effect.map((text) =>
      text.split("\n").filter((line) => counted.some((name) => line.startsWith(name)) && !line.endsWith(" 0"))
    ),
    Effect.orElseSucceed(() => ["(the API's /metrics did not answer)"])
  )

/**
 * For `within`, every 500 ms: `pg_cancel_backend` of every backend of the leader (through HAProxy) waiting for
 * the synchronous standby (`wait_event = 'SyncRep'`); yields how many it cancelled. A tick that cannot connect
 * is skipped.
 */
const cancelWaits = (url: string, within: Duration.Duration) =>
  Effect.gen(function*() {
    const until = (yield* Clock.currentTimeMillis) + Duration.toMillis(within)
    let cancelled = 0
    while ((yield* Clock.currentTimeMillis) < until) {
      cancelled += yield* Effect.promise(async () => {
        const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 })
        try {
          await client.connect()
          const result = await client.query<{ n: number }>(
            "select count(*) filter (where pg_cancel_backend(pid))::int as n from pg_stat_activity where wait_event = 'SyncRep'"
          )
          return result.rows[0]?.n ?? 0
        } catch {
          return 0
        } finally {
          await client.end().catch(() => undefined)
        }
      })
      yield* Effect.sleep(Duration.millis(500))
    }
    return cancelled
  })

/** Runs one scenario; `log` gets progress lines. */
export const run = (options: {
  readonly settings: Settings
  readonly binaries: SystemPackages.Binaries
  readonly log: (line: string) => void
  /** Passes the API's and the deriver's output to `log`. */
  readonly verbose?: boolean | undefined
}): Effect.Effect<Result, ScenarioFailed> => {
  const { log, settings } = options
  return Effect.gen(function*() {
    const haproxyPort = yield* Cluster.freePort
    const output: Array<string> = []
    // The apps start while the cluster bootstraps: they stay up without a database and are ready once it answers.
    const [cluster, stack] = yield* Effect.all([
      PatroniCluster.start({
        binaries: options.binaries,
        synchronousMode: settings.synchronousMode,
        synchronousModeStrict: settings.synchronousMode && settings.strict,
        haproxyPort,
        log
      }),
      Stack.start({
        databaseUrl: Option.some(Topology.routedUrl(haproxyPort)),
        embedded: { directory: undefined, port: 0, maxConnections: 0 },
        apiPort: yield* Cluster.freePort,
        deriverMetricsPort: yield* Cluster.freePort,
        adminToken,
        env: {
          DB_SCHEMA: schema,
          DB_STATEMENT_TIMEOUT_SECONDS: "10",
          DB_APPLICATION_NAME: "failover-lab",
          DERIVER_WORKERS: "2",
          DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "2",
          DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0.5",
          OTEL_SDK_DISABLED: "true"
        },
        onLine: (name, line) => {
          if (options.verbose === true) log(`${name}: ${line}`)
          output.push(`${name}: ${line}`)
          if (output.length > 200) output.shift()
        }
      })
    ], { concurrency: 2 })
    log(`API ${stack.apiUrl} and deriver up, through HAProxy`)
    const admin = yield* ApiClient.make({ baseUrl: stack.apiUrl }).pipe(Effect.orDie)
    const workspace = yield* admin.createWorkspace({ adminToken, name: "failover" }).pipe(Effect.orDie)

    const history = History.make()
    const traffic = yield* Traffic.start({
      apiUrl: stack.apiUrl,
      workspace,
      rate: settings.rate,
      peers: settings.peers,
      sessions: settings.sessions,
      deadline: Duration.seconds(30)
    }, history)
    yield* Effect.sleep(Duration.seconds(settings.warmupSeconds))

    const before = yield* cluster.members
    const oldLeader = PatroniCluster.leaderOf(before) ?? "m0"
    const candidate = before.find((member) => member.name !== oldLeader)?.name ?? "m1"
    const faultAt = yield* Clock.currentTimeMillis
    let faultDoneMillis = 0
    if (settings.fault === "switchover") {
      log(`fault: patronictl switchover --force ${oldLeader} → ${candidate}`)
      yield* Effect.forkScoped(
        cluster.switchover(oldLeader, candidate).pipe(
          Effect.catch((error) => Effect.sync(() => log(`switchover: ${error.message}`))),
          Effect.andThen(elapsed(faultAt)),
          Effect.tap((millis) =>
            Effect.sync(() => {
              faultDoneMillis = millis
            })
          )
        )
      )
    } else if (settings.fault === "primary-loss") {
      const pid = yield* cluster.killPostmaster(oldLeader)
      log(`fault: kill -9 of ${oldLeader}'s postmaster (pid ${pid})`)
    } else if (settings.fault === "stall-cancel-promote") {
      const stopped = yield* cluster.signalServer(candidate, "SIGSTOP")
      log(
        `fault: SIGSTOP of ${candidate}'s server (${stopped} processes) for ${settings.stallSeconds} s, a watchdog cancelling every commit waiting for it`
      )
      const cancelled = yield* cancelWaits(cluster.url, Duration.seconds(settings.stallSeconds))
      const pid = yield* cluster.loseMember(oldLeader)
      const receiver = yield* cluster.cutReplication(candidate)
      yield* cluster.signalServer(candidate, "SIGCONT")
      yield* cluster.editConfig(["synchronous_mode=false", "synchronous_mode_strict=false"])
      log(
        `watchdog: ${cancelled} waits cancelled; ${oldLeader} lost (pid ${pid}), ${candidate}'s WAL receiver killed (pid ${receiver}), SIGCONT of its server, synchronous_mode off (patronictl edit-config)`
      )
    } else {
      const stopped = yield* cluster.signalServer(candidate, "SIGSTOP")
      log(`fault: SIGSTOP of ${candidate}'s server (${stopped} processes) for ${settings.stallSeconds} s`)
      yield* Effect.sleep(Duration.seconds(settings.stallSeconds))
      const pid = yield* cluster.loseMember(oldLeader)
      yield* cluster.signalServer(candidate, "SIGCONT")
      log(`${oldLeader} lost (kill -9 of its Patroni and its postmaster, pid ${pid}), SIGCONT of ${candidate}'s server`)
    }

    let newLeaderMillis = -1
    let restartedOldLeader = false
    const stalled = settings.fault === "stall-then-loss" || settings.fault === "stall-cancel-promote"
    // stall-cancel-promote ends with synchronous_mode off: the rejoined member is a plain replica
    const settledSynchronous = settings.synchronousMode && settings.fault !== "stall-cancel-promote"
    for (;;) {
      const members = yield* Effect.orElseSucceed(cluster.members, () => [])
      const leader = PatroniCluster.leaderOf(members)
      if (newLeaderMillis < 0 && leader !== undefined && leader !== oldLeader && !restartedOldLeader) {
        newLeaderMillis = yield* elapsed(faultAt)
        log(`new leader ${leader} after ${(newLeaderMillis / 1000).toFixed(1)} s`)
        if (stalled) {
          log(`starting ${oldLeader}'s Patroni again`)
          yield* Effect.forkScoped(
            Effect.catch(cluster.restartMember(oldLeader), (error) => Effect.sync(() => log(error.message)))
          )
        }
      }
      if (newLeaderMillis < 0 && restartedOldLeader === false && stalled) {
        const waited = yield* elapsed(faultAt)
        if (waited > (settings.stallSeconds + 20) * 1000) {
          // Patroni promotes no standby it does not know to be synchronous: the cluster waits for the old primary
          log(`no new leader ${(waited / 1000).toFixed(1)} s after the fault; starting ${oldLeader}'s Patroni again`)
          restartedOldLeader = true
          yield* Effect.forkScoped(
            Effect.catch(cluster.restartMember(oldLeader), (error) => Effect.sync(() => log(error.message)))
          )
        }
      }
      if (restartedOldLeader && leader === oldLeader && newLeaderMillis < 0) {
        newLeaderMillis = yield* elapsed(faultAt)
        log(`${oldLeader} leads again after ${(newLeaderMillis / 1000).toFixed(1)} s (no failover)`)
      }
      if (newLeaderMillis >= 0 && PatroniCluster.settled(members, settledSynchronous)) break
      yield* Effect.sleep(Duration.millis(100))
    }
    const rejoinedMillis = yield* elapsed(faultAt)
    const members = PatroniCluster.describe(yield* cluster.members)
    log(`old primary ${oldLeader} streaming again after ${(rejoinedMillis / 1000).toFixed(1)} s: ${members}`)
    yield* Effect.sleep(Duration.seconds(settings.afterSeconds))
    yield* traffic.stop
    log(`traffic stopped: ${history.operations.operations.length} writes`)
    const drainStarted = yield* Clock.currentTimeMillis
    const verdict = yield* Effect.gen(function*() {
      const backlog = yield* Checker.settle(schema, history.operations, "180 seconds")
      const drainSeconds = ((yield* elapsed(drainStarted)) / 1000).toFixed(1)
      log(
        backlog === 0
          ? `queue drained ${drainSeconds} s after the traffic stopped`
          : `queue not drained after ${drainSeconds} s: ${backlog} items left`
      )
      return yield* Checker.reconcile(schema, history.operations)
    }).pipe(Effect.provide(DbSession.layer({
      url: cluster.url,
      connectTimeout: "2 seconds",
      poolClass: "null",
      poolSize: 1,
      driver: "pg",
      applicationName: "failover-lab-checker"
    })))
    const apiCounters = yield* apiCountersOf(stack.apiUrl)
    const exited = [stack.api, stack.deriver].filter((child) => Deferred.isDoneUnsafe(child.exited)).length
    if (exited > 0) log(`processes exited; last output:\n${output.join("\n")}`)
    return {
      settings,
      figures: History.figures(history, faultAt),
      faultDoneMillis,
      timeline: History.timeline(history, faultAt, -settings.warmupSeconds),
      verdict,
      newLeaderMillis,
      failedOver: !restartedOldLeader,
      rejoinedMillis,
      members,
      processesExited: exited,
      apiCounters,
      routing: cluster.routing.filter((change) => change.at >= faultAt).map((change) =>
        `+${((change.at - faultAt) / 1000).toFixed(2)} s ${change.line.replace(/^.*Server primary\//, "").slice(0, 60)}`
      )
    } satisfies Result
  }).pipe(
    Effect.scoped,
    Effect.mapError((error) => new ScenarioFailed({ detail: error.message })),
    Effect.provide(FetchHttpClient.layer),
    Effect.timeoutOrElse({
      duration: Duration.seconds(settings.deadlineSeconds),
      orElse: () => Effect.die(new Error(`scenario not finished within ${settings.deadlineSeconds} s`))
    })
  )
}
