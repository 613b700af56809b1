/**
 * The deriver's circuit in its metrics and logs: a deriver on its own small PostgreSQL server, saturated with
 * `Saturation.hold` (every new connection refused with a real 53300), opens its checkout gate's circuit, and
 * that shows where the API's circuit shows: `admission_circuit_state{gate="checkout"} 2` and
 * `admission_circuit_transitions_total{gate="checkout",from="Closed",to="Open"}` in the Prometheus text the
 * deriver app serves, and a WARN log annotated `admission.gate: checkout`. Released, the next probe closes it.
 */
import { assert, layer } from "@effect/vitest"
import { Metrics } from "@resilience/admission"
import { DbSession } from "@resilience/db-session"
import { Cluster, Saturation } from "@resilience/local-postgres"
import { Migrator, SchemaName } from "@resilience/schema"
import { Context, Effect, Exit, Layer, Logger, Metric, References, Scope } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as Deriver from "../src/Deriver.ts"
import * as DeriverConfig from "../src/DeriverConfig.ts"
import * as Handlers from "../src/Handlers.ts"
import * as QueueSchema from "../src/QueueSchema.ts"
import { eventually } from "./support.ts"

class Server extends Context.Service<Server, Cluster.Cluster>()("test/CheckoutMetrics/Server") {
  static readonly layer = Layer.effect(Server, Cluster.start({ maxConnections: 6 }))
}

interface Logged {
  readonly level: string
  readonly message: string
  readonly gate: unknown
}
const logged: Array<Logged> = []
const capture = Logger.make((options) => {
  logged.push({
    level: options.logLevel,
    message: String(options.message),
    gate: options.fiber.getRef(References.CurrentLogAnnotations)["admission.gate"]
  })
})

const Suite = Server.layer.pipe(
  Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Info")),
  Layer.provideMerge(Logger.layer([capture]))
)

const checkout = Metrics.forGate("checkout")

layer(Suite, { excludeTestServices: true, timeout: "120 seconds" })("The deriver's circuit in its metrics", (it) => {
  it.effect("a saturated server opens the checkout circuit: admission_* with gate=checkout, and a WARN log", () =>
    Effect.gen(function*() {
      const cluster = yield* Server
      const schema = SchemaName.makeUnsafe("checkout_metrics")
      const session = DbSession.layer({
        url: cluster.url,
        connectTimeout: "1 second",
        poolClass: "null",
        poolSize: 1,
        driver: "pg",
        applicationName: "deriver-checkout-metrics"
      })
      yield* Effect.gen(function*() {
        yield* Migrator.run(schema, [QueueSchema.component])
        const config = yield* Effect.orDie(DeriverConfig.make({
          workers: 2,
          pollingSleepIntervalSeconds: 0.05,
          pollingSleepMaxIntervalSeconds: 0.5,
          pollingStartupJitterSeconds: 0,
          shutdownGraceSeconds: 1
        }))
        const opened = (yield* Metric.value(checkout.transition("Closed", "Open"))).count
        const closed = (yield* Metric.value(checkout.transition("HalfOpen", "Closed"))).count
        const scope = yield* Scope.make()
        yield* Scope.provide(Deriver.start({ schema, handlers: Handlers.empty, config }), scope)
        yield* eventually(Effect.map(Metric.value(checkout.admitted), (admitted) => admitted.count > 0))
        assert.strictEqual((yield* Metric.value(checkout.circuitState)).value, 0, "closed while the server answers")

        const saturation = yield* Effect.orDie(
          Saturation.hold(cluster.url, { applicationName: "saturator", patience: "1 second" })
        )
        yield* eventually(Effect.map(Metric.value(checkout.circuitState), (state) => state.value === 2), 30_000)
        const text = yield* PrometheusMetrics.format()
        assert.match(text, /admission_circuit_state\{gate="checkout"\} 2/)
        const transitions = text.split("\n").find((line) =>
          line.startsWith("admission_circuit_transitions_total{") && line.includes(`gate="checkout"`) &&
          line.includes(`from="Closed"`) && line.includes(`to="Open"`)
        )
        assert.isDefined(transitions, "the opening is counted for the checkout gate")
        assert.isAbove((yield* Metric.value(checkout.transition("Closed", "Open"))).count, opened)
        assert.isAbove((yield* Metric.value(checkout.openWindow)).value, 0, "the open window, in seconds")
        assert.deepInclude(logged, {
          level: "Warn",
          message: "database unavailable: checkout circuit open, holding back connection attempts",
          gate: "checkout"
        })

        // Released: the next poll probes, the circuit closes, and that shows too.
        yield* Effect.orDie(saturation.release)
        yield* eventually(Effect.map(Metric.value(checkout.circuitState), (state) => state.value === 0), 30_000)
        assert.isAbove((yield* Metric.value(checkout.transition("HalfOpen", "Closed"))).count, closed)
        assert.strictEqual((yield* Metric.value(checkout.openWindow)).value, 0)
        assert.deepInclude(logged, {
          level: "Info",
          message: "database answered the probe: checkout circuit closed",
          gate: "checkout"
        })
        yield* Scope.close(scope, Exit.void)
      }).pipe(Effect.provide(session))
    }))
})
