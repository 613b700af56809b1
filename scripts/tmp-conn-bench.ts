import { Cluster } from "@resilience/local-postgres"
import { Effect, Exit, Scope } from "effect"
import { readFileSync } from "node:fs"
import pg from "pg"
const busy = () => {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1).map(Number)
  return (f[0]! + f[1]! + f[2]! + f[5]! + f[6]!) / 100
}
const extra = (process.env.EXTRA ?? "").split(" ").filter(Boolean)
const main = Effect.gen(function*() {
  const scope = yield* Scope.make()
  const c = yield* Scope.provide(Cluster.start({ maxConnections: 50 }), scope)
  if (extra.length) {
    yield* Effect.promise(async () => {
      const cl = new pg.Client({ connectionString: c.url })
      await cl.connect()
      for (const sql of extra) await cl.query(sql.replaceAll("~", " "))
      await cl.end()
    })
  }
  if (process.env.HBA) {
    const { writeFileSync } = await_i()
    writeFileSync(c.directory + "/data/pg_hba.conf", "host all all 127.0.0.1/32 trust\n")
    yield* Effect.promise(async () => {
      const cl = new pg.Client({ connectionString: c.url })
      await cl.connect()
      await cl.query("SELECT pg_reload_conf()")
      await cl.end()
    })
  }
  const n = 200
  for (const label of ["warm", "measure"]) {
    const b0 = busy()
    const t0 = Date.now()
    yield* Effect.promise(async () => {
      for (let i = 0; i < n; i++) {
        const cl = new pg.Client({ connectionString: process.env.URLX ? c.url.replace(/:[^:@/]+@/, "@") : c.url })
        await cl.connect()
        await cl.query("SELECT 1")
        await cl.end()
      }
    })
    console.log(
      label,
      "per connection: cpu",
      ((busy() - b0) / n * 1000).toFixed(1),
      "ms wall",
      ((Date.now() - t0) / n).toFixed(1),
      "ms"
    )
  }
  yield* Scope.close(scope, Exit.void)
})
import * as fs from "node:fs"
function await_i() {
  return fs
}
Effect.runPromise(main)
