/**
 * A real Patroni cluster on loopback, started and stopped with its owner's scope: a single-node etcd, two
 * PostgreSQL members managed by Patroni (Debian's binaries, run as the `postgres` account when the lab runs
 * as root), and HAProxy in front, routing to the member whose REST API answers `GET /primary` with 200.
 * Every process is spawned with `setpriv --pdeathsig` (it dies with the lab), the postmasters Patroni
 * daemonises are killed from their `postmaster.pid` when the scope closes, and the lab's directory is
 * removed; a run that was killed outright is reaped by the next one (`Orphans.reap`).
 */
import { Cluster, Orphans, Process, type ServerStartFailed } from "@resilience/local-postgres"
import { Clock, Data, Duration, Effect, Schema, Scope } from "effect"
import { type ChildProcess, execFile } from "node:child_process"
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import type * as SystemPackages from "./SystemPackages.ts"
import * as Topology from "./Topology.ts"

/** One member as Patroni's `GET /cluster` reports it. */
export const MemberState = Schema.Struct({
  name: Schema.String,
  role: Schema.String,
  state: Schema.String,
  timeline: Schema.optional(Schema.Number)
})
export type MemberState = typeof MemberState.Type

const ClusterState = Schema.Struct({ members: Schema.Array(MemberState) })
const decodeClusterState = Schema.decodeUnknownEffect(Schema.fromJsonString(ClusterState))

/** A cluster operation that did not complete: what, and why. */
export class ClusterOperationFailed extends Data.TaggedError("ClusterOperationFailed")<{
  readonly operation: string
  readonly detail: string
}> {
  override get message(): string {
    return `${this.operation}: ${this.detail}`
  }
}

/** A running cluster. */
export interface PatroniCluster {
  readonly topology: Topology.Topology
  /** The database through HAProxy (the leader, whichever it is). */
  readonly url: string
  /** The members as Patroni sees them now (asked of the first member whose REST API answers). */
  readonly members: Effect.Effect<ReadonlyArray<MemberState>, ClusterOperationFailed>
  /** `patronictl switchover --force` from the current leader to the other member. */
  readonly switchover: (from: string, to: string) => Effect.Effect<void, ClusterOperationFailed>
  /** `kill -9` of a member's postmaster (from its `postmaster.pid`); yields the pid. */
  readonly killPostmaster: (member: string) => Effect.Effect<number, ClusterOperationFailed>
  /** The member's machine lost: `kill -9` of its Patroni and its postmaster; yields the postmaster's pid. */
  readonly loseMember: (member: string) => Effect.Effect<number, ClusterOperationFailed>
  /**
   * `patronictl edit-config --force --set key=value …`: changes the dynamic configuration in etcd, as an
   * operator does (it needs no leader).
   */
  readonly editConfig: (settings: ReadonlyArray<string>) => Effect.Effect<void, ClusterOperationFailed>
  /** Starts a lost member's Patroni again (it rejoins as a replica); it stops with the cluster. */
  readonly restartMember: (member: string) => Effect.Effect<void, ClusterOperationFailed>
  /**
   * Sends `signal` to a member's postmaster and every child of it (`SIGSTOP`: the server stops answering
   * anything, its replication connection included, without closing a socket; `SIGCONT`: it goes on).
   * Yields how many processes it signalled.
   */
  readonly signalServer: (
    member: string,
    signal: "SIGSTOP" | "SIGCONT"
  ) => Effect.Effect<number, ClusterOperationFailed>
  /**
   * `kill -9` of a member's WAL receiver (the child of its postmaster named so): its replication connection
   * cut, and with its socket whatever WAL the primary had sent that it had not read yet (the postmaster then
   * reinitialises the server, which recovers from its own WAL). Yields the pid, or 0 when there was none.
   */
  readonly cutReplication: (member: string) => Effect.Effect<number, ClusterOperationFailed>
  /** Lines of HAProxy's output (server state changes), with the wall-clock millisecond they arrived. */
  readonly routing: ReadonlyArray<{ readonly at: number; readonly line: string }>
}

/** What a settled cluster looks like: one leader, every other member streaming from it on its timeline. */
export const settled = (members: ReadonlyArray<MemberState>, synchronousMode: boolean): boolean => {
  const leader = members.find((member) => member.role === "leader" && member.state === "running")
  if (leader === undefined || members.length < 2) return false
  return members.every((member) =>
    member === leader
    || ((synchronousMode ? member.role === "sync_standby" : member.role === "replica" || member.role === "sync_standby")
      && (member.state === "running" || member.state === "streaming")
      && member.timeline === leader.timeline)
  )
}

/** The current leader's name, if there is one running. */
export const leaderOf = (members: ReadonlyArray<MemberState>): string | undefined =>
  members.find((member) => member.role === "leader" && member.state === "running")?.name

const runFile = (command: string, args: ReadonlyArray<string>, operation: string) =>
  Effect.callback<string, ClusterOperationFailed>((resume) => {
    execFile(command, [...args], { timeout: 60_000, encoding: "utf8" }, (error, stdout, stderr) =>
      resume(
        error === null
          ? Effect.succeed(stdout)
          : Effect.fail(new ClusterOperationFailed({ operation, detail: `${error.message}\n${stdout}${stderr}` }))
      ))
  })

const getText = (url: string) =>
  Effect.tryPromise({
    try: (signal) =>
      fetch(url, { signal: AbortSignal.any([signal, AbortSignal.timeout(2_000)]) }).then((response) => response.text()),
    catch: (error) => new ClusterOperationFailed({ operation: `GET ${url}`, detail: String(error) })
  })

/** The pid in a member's `postmaster.pid`, if it has one. */
const postmasterPid = (member: Topology.Member): number | undefined => {
  const file = join(Topology.dataDirectory(member), "postmaster.pid")
  return existsSync(file) ? Number(readFileSync(file, "utf8").split("\n")[0]) : undefined
}

/** The pids of `parent`'s children, from `/proc/<pid>/stat` (field 4 is the parent pid). */
const childrenOf = (parent: number): ReadonlyArray<number> =>
  readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    const stat = Effect.runSync(
      Effect.orElseSucceed(Effect.try(() => readFileSync(`/proc/${pid}/stat`, "utf8")), () => "")
    )
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === parent
  })

/** A process's command line (a PostgreSQL child's names its role, `postgres: walreceiver …`); empty if gone. */
const commandLine = (pid: number): string =>
  Effect.runSync(
    Effect.orElseSucceed(Effect.try(() => readFileSync(`/proc/${pid}/cmdline`, "utf8")), () => "")
  )

const killQuietly = (pid: number | undefined) => {
  if (pid !== undefined && Orphans.isAlive(pid)) process.kill(pid, "SIGKILL")
}

/**
 * Starts etcd, the members (the first bootstraps the cluster, the second is cloned from it) and HAProxy, and
 * waits until the cluster is settled (with `synchronousMode`, the second member is the synchronous standby).
 */
export const start = Effect.fnUntraced(function*(options: {
  readonly binaries: SystemPackages.Binaries
  readonly synchronousMode: boolean
  readonly synchronousModeStrict: boolean
  /** HAProxy's port, chosen by the caller so that the apps can start before the cluster is up. */
  readonly haproxyPort: number
  readonly log: (line: string) => void
}) {
  Orphans.reap()
  const directory = Orphans.makeDirectory("failover")
  yield* Effect.addFinalizer(() => Effect.sync(() => Orphans.remove(directory)))
  const port = Cluster.freePort
  const members: Array<Topology.Member> = []
  for (const name of ["m0", "m1"]) {
    members.push({ name, pgPort: yield* port, restPort: yield* port, directory: join(directory, name) })
  }
  const topology: Topology.Topology = {
    directory,
    etcdClientPort: yield* port,
    etcdPeerPort: yield* port,
    haproxyPort: options.haproxyPort,
    members,
    synchronousMode: options.synchronousMode,
    synchronousModeStrict: options.synchronousModeStrict,
    postgresBin: options.binaries.postgresBin
  }
  const account = Process.serviceAccount()
  const own = (path: string) => {
    if (account !== undefined) chownSync(path, account.uid, account.gid)
  }
  for (const member of members) {
    mkdirSync(member.directory, { mode: 0o700 })
    writeFileSync(Topology.configFile(member), Topology.patroniConfig(topology, member), { mode: 0o600 })
    own(member.directory)
    own(Topology.configFile(member))
  }
  mkdirSync(join(directory, "etcd"), { mode: 0o700 })
  own(join(directory, "etcd"))
  writeFileSync(join(directory, "haproxy.cfg"), Topology.haproxyConfig(topology))

  yield* Process.start({
    server: "etcd",
    command: options.binaries.etcd,
    args: Topology.etcdArgs(topology),
    readyWhen: "ready to serve client requests"
  })
  const patronis = new Map<string, ChildProcess>()
  const startPatroni = (member: Topology.Member) =>
    Effect.gen(function*() {
      const child = yield* Process.start({
        server: `patroni ${member.name}`,
        command: options.binaries.patroni,
        args: [Topology.configFile(member)],
        readyWhen: "no action."
      })
      patronis.set(member.name, child)
      // Runs before the member's own stop (SIGINT, waited for): the data is thrown away, so nothing is shut
      // down cleanly; Patroni daemonises the postmaster, so the postmaster is killed from its pid file.
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          child.kill("SIGKILL")
          killQuietly(postmasterPid(member))
        })
      )
      options.log(`patroni ${member.name} up (pid ${child.pid}; postgres 127.0.0.1:${member.pgPort})`)
    })
  // started together: one bootstraps (Patroni's initialize key decides which), the other clones it
  yield* Effect.forEach(members, startPatroni, { concurrency: "unbounded", discard: true })
  const scope = yield* Effect.scope
  const routing: Array<{ readonly at: number; readonly line: string }> = []
  const haproxy = yield* Process.start({
    server: "haproxy",
    command: options.binaries.haproxy,
    args: ["-db", "-V", "-f", join(directory, "haproxy.cfg")],
    readyWhen: "polling mechanism"
  })
  const now = Effect.runSyncWith(yield* Effect.context<never>())
  haproxy.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    for (const line of chunk.split("\n")) {
      if (line.includes("Server primary/")) routing.push({ at: now(Clock.currentTimeMillis), line })
    }
  })

  const membersNow = Effect.gen(function*() {
    let last: ClusterOperationFailed | undefined
    for (const member of members) {
      const text = yield* Effect.result(getText(`http://127.0.0.1:${member.restPort}/cluster`))
      if (text._tag === "Failure") {
        last = text.failure
        continue
      }
      return (yield* decodeClusterState(text.success).pipe(
        Effect.mapError((error) => new ClusterOperationFailed({ operation: "GET /cluster", detail: error.message }))
      )).members
    }
    return yield* Effect.fail(last ?? new ClusterOperationFailed({ operation: "GET /cluster", detail: "no member" }))
  })

  const memberNamed = (name: string) =>
    Effect.fromNullishOr(members.find((member) => member.name === name)).pipe(
      Effect.mapError(() => new ClusterOperationFailed({ operation: name, detail: "no such member" }))
    )

  /** The pid of a member's running postmaster; fails naming `operation` when there is none. */
  const runningPostmaster = (name: string, operation: string) =>
    Effect.suspend(() => {
      const member = members.find((candidate) => candidate.name === name)
      const pid = member === undefined ? undefined : postmasterPid(member)
      return pid === undefined || !Orphans.isAlive(pid)
        ? Effect.fail(new ClusterOperationFailed({ operation, detail: "no running postmaster" }))
        : Effect.succeed(pid)
    })

  /** Runs `patronictl <args>` with the first member's configuration; a failure names the command. */
  const patronictl = (args: ReadonlyArray<string>) =>
    Effect.asVoid(
      runFile(
        options.binaries.patronictl,
        ["-c", Topology.configFile(members[0]!), ...args],
        `patronictl ${args.join(" ")}`
      )
    )

  const cluster: PatroniCluster = {
    topology,
    url: Topology.routedUrl(topology.haproxyPort),
    members: membersNow,
    switchover: (from, to) => patronictl(["switchover", "--force", "--leader", from, "--candidate", to]),
    editConfig: (settings) =>
      patronictl(["edit-config", "--force", ...settings.flatMap((setting) => ["--set", setting])]),
    killPostmaster: (name) =>
      Effect.map(runningPostmaster(name, `kill -9 ${name}`), (pid) => {
        process.kill(pid, "SIGKILL")
        return pid
      }),
    loseMember: (name) =>
      Effect.gen(function*() {
        const member = yield* memberNamed(name)
        patronis.get(name)?.kill("SIGKILL")
        const pid = postmasterPid(member)
        killQuietly(pid)
        return pid ?? 0
      }),
    restartMember: (name) =>
      Effect.flatMap(memberNamed(name), (member) => Scope.provide(startPatroni(member), scope)).pipe(
        Effect.mapError((error) => new ClusterOperationFailed({ operation: `restart ${name}`, detail: error.message }))
      ),
    cutReplication: (name) =>
      Effect.map(runningPostmaster(name, `cut ${name}'s replication`), (pid) => {
        const receiver = childrenOf(pid).find((child) => commandLine(child).includes("walreceiver"))
        killQuietly(receiver)
        return receiver ?? 0
      }),
    signalServer: (name, signal) =>
      Effect.map(runningPostmaster(name, `${signal} ${name}`), (pid) => {
        const pids = [pid, ...childrenOf(pid)]
        for (const each of pids) process.kill(each, signal)
        return pids.length
      }),
    routing
  }
  yield* awaitSettled(cluster, Duration.seconds(60))
  options.log(`cluster settled: ${describe(yield* cluster.members)}; HAProxy on 127.0.0.1:${topology.haproxyPort}`)
  return cluster
})

/** `m0 leader running tl 1, m1 sync_standby streaming tl 1`. */
export const describe = (members: ReadonlyArray<MemberState>): string =>
  members.map((member) => `${member.name} ${member.role} ${member.state} tl ${member.timeline ?? "-"}`).join(", ")

/**
 * Waits until the cluster is settled and HAProxy routes to its leader (a connection through HAProxy answers
 * as a primary); fails after `within`.
 */
export const awaitSettled = (cluster: PatroniCluster, within: Duration.Input) =>
  Effect.gen(function*() {
    for (;;) {
      const members = yield* Effect.orElseSucceed(cluster.members, () => [])
      if (settled(members, cluster.topology.synchronousMode)) return members
      yield* Effect.sleep(Duration.millis(100))
    }
  }).pipe(
    Effect.timeoutOrElse({
      duration: within,
      orElse: () =>
        Effect.flatMap(
          Effect.orElseSucceed(cluster.members, () => []),
          (members) =>
            Effect.fail(
              new ClusterOperationFailed({
                operation: "await settled",
                detail: `not settled within ${Duration.format(Duration.fromInputUnsafe(within))}: ${describe(members)}`
              })
            )
        )
    })
  )

export type { ServerStartFailed }
