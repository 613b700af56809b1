import * as NodeServices from "@effect/platform-node/NodeServices"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { CliOutput, Command } from "effect/cli"
import * as Cli from "../src/Cli.ts"
import * as Settings from "../src/Settings.ts"

const failure = (effect: Effect.Effect<unknown, { readonly parameter: string; readonly message: string }>) =>
  Effect.runSync(Effect.flip(effect))

describe("Settings", () => {
  it("accepts the defaults", () => {
    assert.deepStrictEqual(Effect.runSync(Settings.validate(Settings.defaults)), Settings.defaults)
  })

  it("names the flag and the allowed range of a bad value", () => {
    const pool = failure(Settings.validate({ ...Settings.defaults, poolSize: 50, maxConnections: 40 }))
    assert.strictEqual(pool.parameter, "--max-connections")
    assert.include(pool.message, "pool-size + 4 (54")
    const horizon = failure(Settings.validate({ ...Settings.defaults, triggerAtSeconds: 100, stallSeconds: 30 }))
    assert.strictEqual(horizon.parameter, "--horizon")
    assert.include(horizon.message, "(130, 3600]")
    assert.strictEqual(failure(Settings.validate({ ...Settings.defaults, apiRps: -1 })).parameter, "--api-rps")
    assert.strictEqual(
      failure(Settings.validate({ ...Settings.defaults, auth: "md5" as Settings.Auth })).parameter,
      "--auth"
    )
    assert.strictEqual(failure(Settings.validate({ ...Settings.defaults, history: 1.5 })).parameter, "--history")
    assert.strictEqual(failure(Settings.validate({ ...Settings.defaults, schemas: -1 })).parameter, "--schemas")
    const claim = failure(Settings.validate({ ...Settings.defaults, claimTimeoutSeconds: 0 }))
    assert.strictEqual(claim.parameter, "--claim-timeout")
    assert.include(claim.message, "(0, 3600]")
  })

  it("names the TLS flags and the pooler's CPU when their values are bad", () => {
    assert.strictEqual(
      failure(Settings.validate({ ...Settings.defaults, tls: "haproxy" as Settings.Tls })).parameter,
      "--tls"
    )
    assert.strictEqual(
      failure(Settings.validate({ ...Settings.defaults, tlsKey: "rsa4096" as Settings.TlsKey })).parameter,
      "--tls-key"
    )
    const cpu = failure(Settings.validate({ ...Settings.defaults, poolerCpu: 4096 }))
    assert.strictEqual(cpu.parameter, "--pooler-cpu")
    assert.include(cpu.message, "-1 (not pinned)")
    const applied = Effect.runSync(Settings.withConfiguration(Settings.defaults, "tls=stunnel,tls-key=rsa2048"))
    assert.strictEqual(applied.tls, "stunnel")
    assert.strictEqual(applied.tlsKey, "rsa2048")
  })

  it("shares schemas among derivers when asked; only adaptive runs the overload signals", () => {
    assert.strictEqual(Settings.schemaCount(Settings.defaults), Settings.defaults.derivers)
    assert.strictEqual(Settings.schemaCount({ ...Settings.defaults, schemas: 10 }), 10)
    assert.deepStrictEqual(Settings.policies.filter(Settings.overloadAware), ["adaptive"])
  })

  it("applies a sweep configuration, and refuses an unknown flag naming the ones allowed", () => {
    const applied = Effect.runSync(Settings.withConfiguration(Settings.defaults, "auth=scram-sha-256, api-rps=250"))
    assert.strictEqual(applied.auth, "scram-sha-256")
    assert.strictEqual(applied.apiRps, 250)
    const unknown = failure(Settings.withConfiguration(Settings.defaults, "rps=250"))
    assert.strictEqual(unknown.parameter, "--configs")
    assert.include(unknown.message, "api-rps")
    assert.strictEqual(failure(Settings.withConfiguration(Settings.defaults, "api-rps=lots")).parameter, "--api-rps")
    assert.strictEqual(failure(Settings.withConfiguration(Settings.defaults, "pool-size=0")).parameter, "--pool-size")
  })
})

/**
 * Runs the lab's command line in this process (Node.js services, as `npm run lab` has): what its presenter
 * printed (help, errors; no colours) and how it ended. Issue #22: these ran the CLI as a process, ~3 s of CPU each.
 */
const runCli = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const formatter = CliOutput.defaultFormatter({ colors: false })
    const printed: Array<string> = []
    const presenter: CliOutput.Presenter = {
      present: (event) =>
        Effect.sync(() => {
          if (event._tag === "Help") printed.push(formatter.formatHelpDoc(event.helpDoc))
          if (event._tag === "InvalidInvocation") {
            printed.push(formatter.formatHelpDoc(event.helpDoc), formatter.formatErrors(event.errors))
          }
        })
    }
    const exit = yield* Command.runWith(Cli.command, { version: Cli.version })(args).pipe(
      Effect.provide(Layer.merge(NodeServices.layer, CliOutput.layerPresenter(presenter))),
      Effect.exit
    )
    return { printed: printed.join("\n"), exit }
  })

describe("lab's command line", () => {
  it.effect("compare --help lists the choices of --policies, as of --policy and --auth", () =>
    Effect.gen(function*() {
      const { printed, exit } = yield* runCli(["compare", "--help"])
      assert.isTrue(Exit.isSuccess(exit))
      const line = printed.split("\n").find((text) => text.trimStart().startsWith("--policies"))
      assert.include(line, `choices: ${Settings.policies.join(", ")}`)
    }))

  it.effect("--writes is optional: a run without it gets as far as checking the other flags", () =>
    Effect.gen(function*() {
      // A bad --pool-size stops the command before anything starts; what it names shows how far parsing got.
      const { printed, exit } = yield* runCli(["run", "--pool-size", "0"])
      assert.isTrue(Exit.isFailure(exit))
      const output = `${printed}\n${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : ""}`
      assert.notInclude(output, "Missing required flag")
      assert.include(output, "--pool-size")
    }))
})
