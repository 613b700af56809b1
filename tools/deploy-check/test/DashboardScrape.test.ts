/**
 * Every metric deploy/grafana/resilience.json names is one the running apps export: the API and the deriver
 * start from their entry points against a real PostgreSQL of this test's own, are driven through what the panels
 * draw (writes stored and derived, an item without a handler, an item waiting for its time, the database
 * saturated until the API's circuit opens and sheds), and their `/metrics` are scraped. A metric an expression names that neither scrape has fails
 * the test, which also shows it failing on a planted name.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Context, Effect, Layer } from "effect"
import pg from "pg"
import { type App, startApp } from "./Apps.ts"
import { type Dashboard, dashboard, unknownMetrics } from "./Dashboard.ts"

const adminToken = "dashboard-scrape-admin-token"

/** The server of this test alone: it is saturated on purpose. */
class OwnCluster extends Context.Service<OwnCluster, Cluster.Cluster>()("test/OwnCluster") {
  static readonly layer = Layer.effect(OwnCluster, Cluster.start({ maxConnections: 12 }))
}

/** The names of an exposition: each `# TYPE` line's metric and each sample's series name. */
const exposedNames = (text: string): ReadonlySet<string> => {
  const names = new Set<string>()
  for (const line of text.split("\n")) {
    const typed = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) /.exec(line)
    if (typed !== null) names.add(typed[1]!)
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line)
    if (sample !== null) names.add(sample[1]!)
  }
  return names
}

/** The sum of a series' samples in an exposition (0 when absent). */
const total = (text: string, name: string): number =>
  text.split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(" ") + 1)), 0)

const http = (app: App, path: string, init?: RequestInit) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${app.port}${path}`, { ...init, signal: AbortSignal.timeout(15_000) })
      .then(async (response) => ({ status: response.status, text: await response.text() }))
      .catch((error: unknown) => ({ status: 0, text: String(error) }))
  )

const scrape = (app: App) => Effect.map(http(app, "/metrics"), (reply) => reply.text)

/** Polls `effect` until `done` holds; fails naming `what` (and the app's last lines) after `withinMillis`. */
const until = <A>(
  what: string,
  app: App,
  effect: Effect.Effect<A>,
  done: (a: A) => boolean,
  withinMillis = 60_000
) =>
  Effect.gen(function*() {
    const deadline = Date.now() + withinMillis
    for (;;) {
      const value = yield* effect
      if (done(value)) return value
      if (Date.now() > deadline) {
        return yield* Effect.die(new Error(`${what}: not within ${withinMillis} ms\n${app.output()}`))
      }
      yield* Effect.sleep("100 millis")
    }
  })

const post = (api: App, path: string, token: string, body: unknown) =>
  http(api, path, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })

/** One statement on the cluster. */
const sql = (url: string, text: string) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    await client.query(text).finally(() => client.end())
  })

describe("deploy/grafana/resilience.json against the running apps", () => {
  layer(OwnCluster.layer, { excludeTestServices: true, timeout: "180 seconds" })((it) => {
    it.effect("every metric a panel names is in a scrape of the API or the deriver", () =>
      Effect.gen(function*() {
        const cluster = yield* OwnCluster
        const env = {
          DATABASE_URL: cluster.url,
          OTEL_SDK_DISABLED: "true",
          API_HOST: "127.0.0.1",
          API_ADMIN_TOKEN: adminToken,
          API_ADMISSION_TRIP_FAILURES: "2",
          DERIVER_POLLING_SLEEP_INTERVAL_SECONDS: "0.2",
          DERIVER_POLLING_SLEEP_MAX_INTERVAL_SECONDS: "1",
          DERIVER_POLLING_STARTUP_JITTER_SECONDS: "0",
          // the queue depth gauges are sampled in the stale-cleanup round: a round a second, so the scrape sees them
          DERIVER_STALE_WORK_UNIT_CLEANUP_INTERVAL_SECONDS: "1"
        }
        const api = yield* startApp("resilience-api", env)
        const deriver = yield* startApp("resilience-deriver", env)
        yield* until("API ready", api, http(api, "/readyz"), (reply) => reply.status === 200)
        yield* until("deriver ready", deriver, http(deriver, "/readyz"), (reply) => reply.status === 200)

        // Writes, stored and derived; one item whose task type has no handler (it fails, marked with its error).
        const created = yield* post(api, "/v1/workspaces", adminToken, { name: "scrape" })
        assert.strictEqual(created.status, 201, created.text)
        const { token } = JSON.parse(created.text) as { token: string }
        for (const content of ["one", "two", "three"]) {
          const appended = yield* post(api, "/v1/workspaces/scrape/sessions/s1/messages", token, {
            messages: [{ peer: "alice", content }]
          })
          assert.strictEqual(appended.status, 201, appended.text)
        }
        yield* sql(
          cluster.url,
          "insert into public.queue (work_unit_key, task_type) values ('scrape-x', 'no-such-task')"
        )
        yield* until(
          "items processed and failed",
          deriver,
          scrape(deriver),
          (text) => total(text, "deriver_items_processed_total") > 0 && total(text, "deriver_items_failed_total") > 0
        )

        // An item that waits an hour for its time: the next cleanup round counts it in the queue depth gauges.
        yield* sql(
          cluster.url,
          "insert into public.queue (work_unit_key, task_type, run_at) values ('scrape-later', 'no-such-task', now() + interval '1 hour')"
        )
        yield* until(
          "queue depth sampled",
          deriver,
          scrape(deriver),
          (text) =>
            total(text, "deriver_queue_depth") >= 1 && text.includes("deriver_queue_oldest_pending_age_seconds ")
        )

        // The database saturated: the API answers 503 until its circuit opens and sheds.
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Saturation.hold(cluster.url).pipe(Effect.orDie)
          yield* until(
            "503s and a shed",
            api,
            Effect.andThen(
              post(api, "/v1/workspaces/scrape/sessions/s1/messages", token, {
                messages: [{ peer: "alice", content: "during" }]
              }),
              scrape(api)
            ),
            (text) => total(text, "api_error_responses_total") > 0 && total(text, "admission_shed_total") > 0
          )
        }))

        const known = new Set([...exposedNames(yield* scrape(api)), ...exposedNames(yield* scrape(deriver))])
        assert.include([...known], "db_acquisitions_total", "the scrapes were read")
        assert.deepStrictEqual(unknownMetrics(dashboard, known), [], "metrics no running app exports")

        // The same check on the dashboard with one planted misspelling: it names it.
        const planted: Dashboard = {
          ...dashboard,
          panels: [...dashboard.panels, {
            id: 999,
            title: "Planted",
            type: "timeseries",
            targets: [{ expr: "sum(rate(deriver_claim_total[5m])) / sum(db_connections_in_use)" }]
          }]
        }
        assert.deepStrictEqual(unknownMetrics(planted, known), ["panel \"Planted\": deriver_claim_total"])
      }))
  })
})
