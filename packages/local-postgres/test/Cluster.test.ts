import { assert, describe, it } from "@effect/vitest"
import { Cluster, Orphans, Saturation } from "@resilience/local-postgres"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"

describe("Cluster", () => {
  // As root PostgreSQL runs as the service account; a folder only root can enter (mktemp -d) must stop the start
  // with what to do, not fail inside initdb with "Permission denied".
  it.effect.skipIf(userInfo().uid !== 0)(
    "as root, a directory the service account cannot enter stops the start naming the folder and the fix",
    () =>
      Effect.gen(function*() {
        const privateFolder = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "root-only-"))),
          (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
        )
        const error = yield* Effect.flip(Cluster.start({ directory: join(privateFolder, "postgres") }))
        assert.strictEqual(error._tag, "ServerStartFailed")
        assert.include(error.message, `cannot enter ${privateFolder} (owner uid 0, mode 700)`)
        assert.include(error.message, `chmod o+x ${privateFolder}`)
        assert.isFalse(existsSync(join(privateFolder, "postgres", "data")))
      }).pipe(Effect.scoped)
  )

  it("names the template by the binaries' content, not by their path: two installs share one, another build not", () => {
    const folder = mkdtempSync(join(tmpdir(), "template-key-"))
    try {
      const install = (name: string, postgres: string) => {
        mkdirSync(join(folder, name))
        writeFileSync(join(folder, name, "initdb"), "initdb 18.4")
        writeFileSync(join(folder, name, "postgres"), postgres)
        return { initdb: join(folder, name, "initdb"), postgres: join(folder, name, "postgres") }
      }
      const first = Cluster.templateKey(install("checkout-a", "postgres 18.4"))
      assert.match(first, /^[0-9a-f]{16}$/)
      assert.strictEqual(Cluster.templateKey(install("checkout-b", "postgres 18.4")), first)
      assert.notStrictEqual(Cluster.templateKey(install("checkout-c", "postgres 18.5")), first)
    } finally {
      rmSync(folder, { recursive: true, force: true })
    }
  })

  it.live("refuses the (N+1)-th connection with SQLSTATE 53300", () =>
    Effect.gen(function*() {
      const cluster = yield* Cluster.start({ maxConnections: 3 })
      const { held, refusal } = yield* Saturation.hold(cluster.url)
      assert.strictEqual(held, 3)
      assert.strictEqual(refusal.code, "53300")
      assert.match(refusal.message, /too many clients/)
    }).pipe(Effect.scoped))

  it.effect("leaves no process and no data directory behind once its scope closes", () =>
    Effect.gen(function*() {
      const cluster = yield* Effect.scoped(Cluster.start({ maxConnections: 5 }))
      assert.isFalse(Orphans.isAlive(cluster.pid))
      assert.isFalse(existsSync(cluster.directory))
    }))

  it.effect(
    "does not outlive a test process that is killed outright, and the next run deletes its files",
    () =>
      Effect.gen(function*() {
        const child = spawn(process.execPath, [
          "--conditions=@resilience/source",
          join(import.meta.dirname, "fixtures", "start-cluster-and-wait.ts")
        ], {
          stdio: ["ignore", "pipe", "inherit"]
        })
        const started = yield* Effect.callback<{ pid: number; directory: string }>((resume) => {
          let output = ""
          child.stdout.on("data", (chunk: Buffer) => {
            output += chunk.toString("utf8")
            const line = output.split("\n").find((l) => l.startsWith("{"))
            if (line !== undefined) resume(Effect.succeed(JSON.parse(line)))
          })
        })
        assert.isTrue(Orphans.isAlive(started.pid))
        child.kill("SIGKILL")
        yield* Effect.promise(() => new Promise((resolve) => child.once("exit", resolve)))
        const gone = yield* Effect.promise(async () => {
          for (let waited = 0; waited < 10_000 && Orphans.isAlive(started.pid); waited += 100) {
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
          return !Orphans.isAlive(started.pid)
        })
        assert.isTrue(gone, "the postmaster died with its parent")
        // Any cluster start on this machine reaps orphans, so a concurrent suite may delete the directory first,
        // and the postmaster's children can outlive it for a moment: reap until the directory is gone, bounded.
        const reaped = yield* Effect.promise(async () => {
          const seen: Array<string> = []
          for (let waited = 0; waited < 10_000 && existsSync(started.directory); waited += 100) {
            seen.push(...Orphans.reap())
            if (existsSync(started.directory)) await new Promise((resolve) => setTimeout(resolve, 100))
          }
          return seen
        })
        assert.isFalse(existsSync(started.directory), `not reaped (reaped ${JSON.stringify(reaped)})`)
      }),
    60_000
  )
})
