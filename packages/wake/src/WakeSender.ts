/**
 * The sender of wakes (the API's side): after a write that enqueued work has committed, {@link WakeSender.wake}
 * tells the deriver of its schema over HTTP ({@link WakeContract}), fire-and-forget: it returns at once, never
 * fails and never waits for the request. Requests to the target are coalesced ({@link Coalesce}): at most one in
 * flight, and at most one more waiting behind it, however many writes commit meanwhile; each is bounded by
 * {@link Options.timeout}. A failed request is counted (`wakes_failed_total`) and dropped, never retried: the
 * deriver's poll schedule is the backstop.
 *
 * Options, validated into {@link Settings}; {@link config} reads them from variables the application names.
 * Without a URL the sender is {@link disabled} (what {@link WakeSender} is unless a layer provides one).
 *
 * @since 0.3.0
 */
import { InvalidParameter, Parameters } from "@resilience/parameters"
import { Config, Context, Duration, Effect, Layer, Metric, Option, Schema } from "effect"
import type { Scope } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Coalesce from "./Coalesce.ts"
import * as WakeMetrics from "./internal/WakeMetrics.ts"
import * as WakeContract from "./WakeContract.ts"

/**
 * Sender options.
 *
 * @since 0.3.0
 * @category options
 */
export interface Options {
  /** The deriver's wake endpoint, e.g. `http://deriver:9464/wake`. */
  readonly url: string | URL
  /** The schema named in the wake (the API's `DB_SCHEMA`). */
  readonly schema: string
  /** How long one request may take before it is abandoned (default 500 ms; > 0, at most 10 s). */
  readonly timeout?: Duration.Input | undefined
}

/**
 * The defaults: a wake request is abandoned after 500 ms.
 *
 * @since 0.3.0
 * @category options
 */
export const defaults = { timeout: Duration.millis(500) } as const

/**
 * Validated options.
 *
 * @since 0.3.0
 * @category options
 */
export interface Settings {
  readonly url: URL
  readonly schema: WakeContract.WakeRequest["schema"]
  readonly timeoutMillis: number
}

const maxTimeoutMillis = 10_000

/** The timeout in the environment: whole milliseconds in [1, 10000]. */
const TimeoutMillis = Schema.NumberFromString.check(
  Schema.isInt(),
  Schema.isBetween({ minimum: 1, maximum: maxTimeoutMillis })
)

/**
 * Validates options: an `http:` or `https:` URL, a schema name, a timeout in (0, 10 s].
 *
 * @since 0.3.0
 * @category options
 */
export const settings = (options: Options): Effect.Effect<Settings, InvalidParameter.InvalidParameter> =>
  Effect.gen(function*() {
    const url = yield* parseUrl(options.url, "url")
    const decoded = WakeContract.decode({ schema: options.schema })
    if (decoded._tag === "Failure") {
      return yield* new InvalidParameter.InvalidParameter({
        parameter: "schema",
        value: options.schema,
        allowed: "a schema name (1 to 63 characters of a-z, 0-9 and _, starting with a letter or _)"
      })
    }
    const timeoutMillis = yield* Parameters.positiveDuration(options.timeout ?? defaults.timeout, "timeout")
    if (timeoutMillis > maxTimeoutMillis) {
      return yield* new InvalidParameter.InvalidParameter({
        parameter: "timeout",
        value: options.timeout,
        allowed: `a duration in (0, ${maxTimeoutMillis} ms]`
      })
    }
    return { url, schema: decoded.success.schema, timeoutMillis }
  })

const parseUrl = (value: string | URL, parameter: string): Effect.Effect<URL, InvalidParameter.InvalidParameter> => {
  const invalid = new InvalidParameter.InvalidParameter({
    parameter,
    value: String(value),
    allowed: "an http: or https: URL, e.g. http://deriver:9464/wake"
  })
  if (!URL.canParse(String(value))) return Effect.fail(invalid)
  const url = new URL(String(value))
  return url.protocol === "http:" || url.protocol === "https:" ? Effect.succeed(url) : Effect.fail(invalid)
}

/**
 * The environment variables of {@link config}, as the application names them.
 *
 * @since 0.3.0
 * @category options
 */
export interface Names {
  /** The wake URL; unset or empty: wakes are off. */
  readonly url: string
  /** The request timeout in milliseconds. */
  readonly timeoutMillis: string
}

/**
 * The options from the environment, or none when the URL variable is unset or empty (wakes off). An invalid
 * value fails naming its variable.
 *
 * @since 0.3.0
 * @category options
 */
export const config = (
  names: Names,
  schema: Config.Config<string>
): Config.Config<Option.Option<Settings>> =>
  Config.all({
    url: Config.String(names.url).pipe(Config.withDefault("")),
    timeoutMillis: Config.schema(TimeoutMillis, names.timeoutMillis).pipe(
      Config.withDefault(Duration.toMillis(defaults.timeout))
    ),
    schema
  }).pipe(
    InvalidParameter.validateConfig(({ schema, timeoutMillis, url }) =>
      url === "" ? Effect.succeedNone : settings({ url, schema, timeout: Duration.millis(timeoutMillis) }).pipe(
        Effect.mapError((error) =>
          error.parameter === "url" ? new InvalidParameter.InvalidParameter({ ...error, parameter: names.url }) : error
        ),
        Effect.map(Option.some)
      )
    )
  )

/**
 * What a request ended with: accepted (`202`), or why not.
 *
 * @since 0.3.0
 * @category models
 */
export type Result = "sent" | "timeout" | "error" | "status"

/**
 * A sender.
 *
 * @since 0.3.0
 * @category models
 */
export interface Sender {
  /** Wakes the target (fire-and-forget): returns at once, never fails. */
  readonly wake: Effect.Effect<void>
  /** Whether wakes are on (a URL is configured). */
  readonly enabled: boolean
}

/**
 * A sender that sends nothing (wakes off).
 *
 * @since 0.3.0
 * @category constructors
 */
export const disabled: Sender = { wake: Effect.void, enabled: false }

/**
 * The sender as a service; unless a layer provides one, {@link disabled}.
 *
 * @since 0.3.0
 * @category services
 */
export const WakeSender: Context.Reference<Sender> = Context.Reference<Sender>("@resilience/wake/WakeSender", {
  defaultValue: () => disabled
})

/** One request: resolves with its result, never rejects; aborted (socket destroyed) past the timeout. */
const request = (settings: Settings, agent: Http.Agent, body: string): Effect.Effect<Result> =>
  Effect.callback<Result>((resume) => {
    const send = settings.url.protocol === "https:" ? Https.request : Http.request
    let done = false
    const finish = (result: Result) => {
      if (done) return
      done = true
      clearTimeout(timer)
      resume(Effect.succeed(result))
    }
    const req = send(settings.url, {
      method: "POST",
      agent,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
    }, (res) => {
      res.resume()
      res.on("end", () => finish(res.statusCode === 202 ? "sent" : "status"))
      res.on("error", () => finish("error"))
    })
    const timer = setTimeout(() => {
      finish("timeout")
      req.destroy()
    }, settings.timeoutMillis)
    req.on("error", () => finish("error"))
    req.end(body)
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      req.destroy()
    })
  })

/**
 * A sender for validated settings, whose requests run in `scope`'s lifetime (closing it abandons the one in
 * flight).
 *
 * @since 0.3.0
 * @category constructors
 */
export const make = (settings: Settings): Effect.Effect<Sender, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const agent = settings.url.protocol === "https:"
      ? new Https.Agent({ keepAlive: true, maxSockets: 1 })
      : new Http.Agent({ keepAlive: true, maxSockets: 1 })
    yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
    const body = WakeContract.encode({ schema: settings.schema })
    let state = Coalesce.initial
    const failedBy = {
      timeout: Metric.withAttributes(WakeMetrics.failed, { reason: "timeout" }),
      error: Metric.withAttributes(WakeMetrics.failed, { reason: "error" }),
      status: Metric.withAttributes(WakeMetrics.failed, { reason: "status" })
    }
    /** Sends while a wake waits: one request at a time. */
    const drain: Effect.Effect<void> = Effect.gen(function*() {
      while (true) {
        state = Coalesce.started(state, yield* Effect.clockWith((clock) => clock.currentTimeMillis))
        const result = yield* request(settings, agent, body)
        yield* result === "sent" ? Metric.update(WakeMetrics.sent, 1) : Metric.update(failedBy[result], 1)
        const next = Coalesce.finished(state, { succeeded: result === "sent", woken: false })
        state = next.state
        if (!next.again) return
      }
    })
    const wake = Effect.suspend(() => {
      const [decision, next] = Coalesce.wake(state)
      state = next
      if (decision === "pollNow") return Effect.asVoid(Effect.forkIn(drain, scope))
      return Metric.update(WakeMetrics.coalesced, 1)
    })
    return { wake, enabled: true }
  })

/**
 * A layer providing {@link WakeSender}: a sender for `settings`, or {@link disabled} when none.
 *
 * @since 0.3.0
 * @category layers
 */
export const layer = (settings: Option.Option<Settings>): Layer.Layer<never> =>
  Option.isNone(settings)
    ? Layer.empty
    : Layer.effectContext(Effect.map(make(settings.value), (sender) => Context.make(WakeSender, sender)))
