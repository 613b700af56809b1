/**
 * The whole system as production runs it, on one machine: a database (an external `DATABASE_URL`, or the
 * embedded server), the API and one deriver as separate processes. Closing the scope stops the deriver,
 * then the API, then the database, so nothing is cut off mid-write.
 */
import { Variables } from "@resilience/environment"
import { Deferred, Effect, Option } from "effect"
import { join } from "node:path"
import * as AwaitReady from "./AwaitReady.ts"
import * as Child from "./Child.ts"
import * as EmbeddedServer from "./EmbeddedServer.ts"

/** The repository root, where the apps' entry points live. */
export const repositoryRoot = join(import.meta.dirname, "..", "..", "..")

/** What to run; `onLine` gets every line of both apps' output (`Child.Options`). */
export interface Options extends Pick<Child.Options, "onLine"> {
  /** An external server; when absent the embedded server runs with `embedded`. */
  readonly databaseUrl: Option.Option<string>
  readonly embedded: EmbeddedServer.Options
  readonly apiPort: number
  readonly deriverMetricsPort: number
  readonly adminToken: string
  /** Extra environment for both apps (DB_*, DERIVER_*, API_* settings). */
  readonly env: Record<string, string>
}

/** A running system. */
export interface Stack {
  readonly databaseUrl: string
  readonly embedded: boolean
  readonly apiUrl: string
  readonly deriverMetricsUrl: string
  /** Where the API wakes the deriver after each write (`API_WAKE_URL`); empty: wakes off. */
  readonly wakeUrl: string
  readonly api: Child.Child
  readonly deriver: Child.Child
}

/**
 * Starts database, API and deriver, and waits until both say they are ready (their `/readyz`), printing what
 * it waits for; everything stops, in reverse order, when the scope closes. Needs an `HttpClient`.
 */
export const start = Effect.fnUntraced(function*(options: Options) {
  const databaseUrl = Option.isSome(options.databaseUrl)
    ? options.databaseUrl.value
    : yield* EmbeddedServer.start(options.embedded)
  const common = { ...options.env, [Variables.database.url]: databaseUrl }
  const deriverUrl = `http://127.0.0.1:${options.deriverMetricsPort}`
  // the API wakes the deriver after each write that enqueued work (set API_WAKE_URL empty to turn it off)
  const wakeUrl = options.env[Variables.wake.url] ?? process.env[Variables.wake.url] ?? `${deriverUrl}/wake`
  const api = yield* Child.start({
    name: "api",
    entry: join(repositoryRoot, "apps", "api", "src", "main.ts"),
    env: {
      ...common,
      [Variables.api.port]: String(options.apiPort),
      [Variables.api.adminToken]: options.adminToken,
      [Variables.wake.url]: wakeUrl
    },
    onLine: options.onLine
  })
  const deriver = yield* Child.start({
    name: "deriver",
    entry: join(repositoryRoot, "apps", "deriver", "src", "main.ts"),
    env: { ...common, [Variables.deriverApp.metricsPort]: String(options.deriverMetricsPort) },
    onLine: options.onLine
  })
  const apiUrl = `http://127.0.0.1:${options.apiPort}`
  yield* Effect.log(`api pid ${api.process.pid}, deriver pid ${deriver.process.pid}`)
  yield* AwaitReady.wait({ child: api, check: yield* AwaitReady.api(apiUrl) })
  yield* AwaitReady.wait({ child: deriver, check: yield* AwaitReady.deriver(deriverUrl) })
  return {
    databaseUrl,
    embedded: Option.isNone(options.databaseUrl),
    apiUrl,
    deriverMetricsUrl: `${deriverUrl}/metrics`,
    wakeUrl,
    api,
    deriver
  } satisfies Stack
})

/** Waits until either child exits on its own: a running system never completes this successfully. */
export const awaitUnexpectedExit = (stack: Stack) =>
  Effect.raceFirst(Deferred.await(stack.api.exited), Deferred.await(stack.deriver.exited))
