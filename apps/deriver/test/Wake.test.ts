/**
 * `POST /wake` of the deriver process (`apps/deriver/src/main.ts`) against a real PostgreSQL: a bad body is a 400
 * naming the field, another schema a 404, a body over 1 KiB a 413; a wake for its schema makes the idle deriver
 * (at its 30 s cap, no jitter) poll at once and process the item, long before its schedule would.
 */
import { assert, layer } from "@effect/vitest"
import { DbSession } from "@resilience/db-session"
import { Messages } from "@resilience/domain"
import { Cluster } from "@resilience/local-postgres"
import { SchemaName } from "@resilience/schema"
import { EntryPoint, Eventually, TestDatabase, TestSession } from "@resilience/test-db"
import { Effect } from "effect"
import { tenant } from "./support.ts"

const Database = TestSession.layer(DbSession.layer, { poolSize: 2 })

const wake = (port: number, body: string) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}/wake`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body
    })
    return { status: response.status, json: await response.json() as Record<string, unknown> }
  })

const pending = (schema: SchemaName.SchemaName) =>
  Effect.flatMap(Effect.service(DbSession), (db) =>
    Effect.map(
      db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SchemaName.qualify(schema, "queue")} WHERE NOT processed`
      ),
      (rows) => rows[0]!.n
    ))

const metric = (port: number, name: string) =>
  Effect.promise(async () => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text())
    const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
  })

layer(Database, { excludeTestServices: true, timeout: "120 seconds" })("apps/deriver POST /wake (process)", (it) => {
  it.effect("400 names the field, 404 another schema, 413 a large body; a wake makes the idle deriver poll now", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const schema = yield* tenant("wake_tenant")
      const port = yield* Cluster.freePort
      const deriver = yield* EntryPoint.start("apps/deriver/src/main.ts", {
        ...EntryPoint.compileCache,
        DATABASE_URL: database.url,
        DB_SCHEMA: schema,
        DERIVER_METRICS_PORT: String(port),
        DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
        DERIVER_POLLING_INITIAL_INTERVAL: "max",
        DERIVER_POLLING_JITTER_RATIO: "0"
      })
      // ready: the schema is there and the loop polls (its first poll, then 30 s of sleep)
      yield* Eventually.until(
        () => `the deriver ready and its first poll; its output: ${deriver.output()}`,
        Effect.gen(function*() {
          const ready = yield* Effect.promise(() =>
            fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0)
          )
          return ready === 200 && (yield* metric(port, "deriver_polls_total")) > 0
        }),
        { within: "60 seconds", every: "50 millis" }
      )
      const bad = yield* wake(port, JSON.stringify({ schema: "Not A Schema" }))
      assert.strictEqual(bad.status, 400)
      assert.match(String(bad.json.detail), /^Invalid wake: schema: /)
      const missing = yield* wake(port, "{}")
      assert.strictEqual(missing.status, 400)
      assert.match(String(missing.json.detail), /schema/)
      const other = yield* wake(port, JSON.stringify({ schema: "someone_else" }))
      assert.strictEqual(other.status, 404)
      const large = yield* wake(port, JSON.stringify({ schema: schema, pad: "x".repeat(2000) }))
      assert.strictEqual(large.status, 413)
      assert.strictEqual(yield* metric(port, "deriver_wakes_received_total"), 0, "bad wakes reach no loop")

      yield* Messages.append(schema, "acme", "s1", [{ peer: "alice", content: "wake up" }])
      assert.strictEqual(yield* pending(schema), 1)
      const woken = yield* wake(port, JSON.stringify({ schema }))
      assert.strictEqual(woken.status, 202)
      assert.strictEqual(woken.json.decision, "pollNow")
      // its schedule would poll again 30 s after the first poll: a pickup within 10 s is the wake's (the deadline
      // tells the wake from the schedule, a third of the schedule's interval)
      yield* Eventually.until(
        "the item picked up by the woken poll, before the schedule's next",
        Effect.map(pending(schema), (n) => n === 0),
        { within: "10 seconds" }
      )
      assert.strictEqual(yield* metric(port, "deriver_wakes_received_total"), 1)
      assert.isAtLeast(yield* metric(port, "deriver_polls_woken_total"), 1)
      deriver.child.kill("SIGTERM")
      yield* Effect.promise(() => deriver.exited)
    }))
})
