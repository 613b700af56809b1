/**
 * Bookkeeping that keeps local servers from outliving the process that started them: every throw-away cluster
 * or pooler lives in its own directory under one root, named after its owner's pid. Anything whose owner is
 * gone is stopped and deleted by the next start (and by the test harness's global teardown), even when the
 * owner was killed outright.
 */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** The directory that holds every throw-away server directory. */
export const root = join(tmpdir(), "resilience-postgres")

/** Whether a process with this pid exists. */
export const isAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  const probe = Effect.runSync(Effect.result(Effect.try(() => process.kill(pid, 0))))
  return probe._tag === "Success" || (probe.failure.cause as NodeJS.ErrnoException).code === "EPERM"
}

/**
 * Shared data-directory templates (`Cluster.start`), owned by no process: beside {@link root}, not in it, so no
 * reaper (this one or an older copy's) deletes one while a start copies it.
 */
export const templates = join(tmpdir(), "resilience-postgres-templates")

/** A fresh directory for a server owned by this process. */
export const makeDirectory = (kind: string): string => {
  mkdirSync(root, { recursive: true, mode: 0o755 })
  const directory = join(root, `${process.pid}-${kind}-${randomBytes(4).toString("hex")}`)
  mkdirSync(directory, { mode: 0o755 })
  return directory
}

/** Deletes a server directory once its server has stopped. */
export const remove = (directory: string): void => rmSync(directory, { recursive: true, force: true })

/**
 * The server pids a directory records: PostgreSQL's postmaster.pid and the pooler's pid file, at its top and
 * one level down (a directory holding several servers, such as the failover lab's members).
 */
const serverPids = (directory: string): ReadonlyArray<number> => {
  // another reaper may be deleting the same directory: what is gone has nothing to stop
  const entries = Effect.runSync(
    Effect.orElseSucceed(Effect.try(() => readdirSync(directory, { withFileTypes: true })), () => [])
  )
  const places = [
    directory,
    ...entries.filter((entry) => entry.isDirectory()).map((entry) => join(directory, entry.name))
  ]
  return places
    .flatMap((place) => [join(place, "data", "postmaster.pid"), join(place, "server.pid")])
    .flatMap((file) =>
      Effect.runSync(
        Effect.orElseSucceed(Effect.try(() => [Number(readFileSync(file, "utf8").split("\n")[0])]), () => [])
      )
    )
}

/** Stops and deletes every server directory whose owning process has exited; returns what it removed. */
export const reap = (): ReadonlyArray<string> => {
  if (!existsSync(root)) return []
  const removed: Array<string> = []
  for (const name of readdirSync(root)) {
    const owner = Number(name.split("-")[0])
    if (isAlive(owner)) continue
    const directory = join(root, name)
    for (const pid of serverPids(directory)) if (isAlive(pid)) process.kill(pid, "SIGKILL")
    rmSync(directory, { recursive: true, force: true })
    removed.push(directory)
  }
  return removed
}
