/**
 * The Debian packages the lab runs (`patroni`, `etcd-server`, `haproxy`, `postgresql`): where their binaries
 * are, and why the lab cannot run here when one is missing. Under `CI=true` a missing package is never a
 * reason to skip: there it is a broken CI set-up, and the run fails instead.
 */
import { Data } from "effect"
import { existsSync, readdirSync } from "node:fs"
import { join } from "node:path"

/** The installed binaries the lab starts. */
export interface Binaries {
  readonly patroni: string
  readonly patronictl: string
  readonly etcd: string
  readonly haproxy: string
  /** PostgreSQL's server binaries (`initdb`, `postgres`, `pg_rewind`, …), Debian's `/usr/lib/postgresql/NN/bin`. */
  readonly postgresBin: string
}

/** A Debian package the lab needs is not installed. */
export class SystemPackagesMissing extends Data.TaggedError("SystemPackagesMissing")<{ readonly missing: string }> {
  override get message(): string {
    return `not installed: ${this.missing} (apt-get install --no-install-recommends patroni etcd-server haproxy postgresql)`
  }
}

/** The install command `.ci/run` runs, and the skip message repeats. */
export const installCommand = "apt-get install -y --no-install-recommends patroni etcd-server haproxy postgresql"

const first = (candidates: ReadonlyArray<string>): string | undefined => candidates.find((path) => existsSync(path))

/** The newest `/usr/lib/postgresql/NN/bin` holding a server (`postgres`), if any. */
const postgresBin = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  return readdirSync(root)
    .filter((version) => /^\d+$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => join(root, version, "bin"))
    .find((bin) => existsSync(join(bin, "postgres")) && existsSync(join(bin, "pg_rewind")))
}

/** The binaries, or the names of the packages that are missing. */
export const find = (): Binaries | SystemPackagesMissing => {
  const found = {
    patroni: first(["/usr/bin/patroni"]),
    patronictl: first(["/usr/bin/patronictl"]),
    etcd: first(["/usr/bin/etcd"]),
    haproxy: first(["/usr/sbin/haproxy", "/usr/bin/haproxy"]),
    postgresBin: postgresBin()
  }
  const packages: Record<keyof typeof found, string> = {
    patroni: "patroni",
    patronictl: "patroni",
    etcd: "etcd-server",
    haproxy: "haproxy",
    postgresBin: "postgresql"
  }
  const missing = [
    ...new Set(
      (Object.keys(found) as Array<keyof typeof found>).filter((key) => found[key] === undefined).map((key) =>
        packages[key]
      )
    )
  ]
  return missing.length > 0
    ? new SystemPackagesMissing({ missing: missing.join(", ") })
    : (found as Binaries)
}

/** Why the lab's test skips here, or undefined when it runs (always undefined under `CI=true`). */
export const skipReason = (): string | undefined => {
  const binaries = find()
  return binaries instanceof SystemPackagesMissing && process.env["CI"] !== "true"
    ? `${binaries.message}; skipped outside CI`
    : undefined
}
