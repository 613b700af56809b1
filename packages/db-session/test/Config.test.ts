/** `DbSession.layerConfig(names)`'s environment: defaults, parsing, and a clear refusal of invalid values. */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Redacted } from "effect"
import { DbConfig } from "../src/index.ts"

// The library reads the names its caller gives; here the reference service's, as the apps pass them
// (`@resilience/environment`): DATABASE_URL and DB_ + each option's name in upper snake case.
const optionNames = [
  "connectTimeoutSeconds",
  "poolClass",
  "poolSize",
  "driver",
  "applicationName",
  "statementTimeoutSeconds",
  "sslmode",
  "sslrootcert",
  "sslcert",
  "sslkey"
] as const
const upperSnake = (option: string) => `DB_${option.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`
const names = {
  url: "DATABASE_URL",
  ...Object.fromEntries(optionNames.map((option) => [option, upperSnake(option)]))
} as unknown as DbConfig.Names

const read = (env: Record<string, string>) => DbConfig.config(names).parse(ConfigProvider.fromEnv({ env }))

describe("DbSession config", () => {
  it.effect("applies the documented defaults", () =>
    Effect.gen(function*() {
      const options = yield* read({ DATABASE_URL: "postgres://u:secret@db:5432/app" })
      assert.strictEqual(Redacted.value(options.url as Redacted.Redacted<string>), "postgres://u:secret@db:5432/app")
      assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout)), 2000)
      assert.strictEqual(options.poolClass, "null")
      assert.strictEqual(options.poolSize, 10)
      assert.strictEqual(options.driver, "pg")
      assert.strictEqual(options.applicationName, "resilience")
      assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(options.statementTimeout ?? 0)), 30_000)
      assert.deepStrictEqual(options.tls, {
        sslmode: "disable",
        sslrootcert: undefined,
        sslcert: undefined,
        sslkey: undefined
      })
      assert.notInclude(String(options.url), "secret")
    }))

  it.effect("reads every variable", () =>
    Effect.gen(function*() {
      const options = yield* read({
        DATABASE_URL: "postgres://db/app",
        DB_CONNECT_TIMEOUT_SECONDS: "0.5",
        DB_POOL_CLASS: "queue",
        DB_POOL_SIZE: "3",
        DB_DRIVER: "postgres",
        DB_APPLICATION_NAME: "deriver",
        DB_STATEMENT_TIMEOUT_SECONDS: "2.5",
        DB_SSLMODE: "verify-full",
        DB_SSLROOTCERT: "/etc/ssl/db-ca.pem",
        DB_SSLCERT: "/etc/ssl/client.pem",
        DB_SSLKEY: "/etc/ssl/client.key"
      })
      assert.deepStrictEqual(options.tls, {
        sslmode: "verify-full",
        sslrootcert: "/etc/ssl/db-ca.pem",
        sslcert: "/etc/ssl/client.pem",
        sslkey: "/etc/ssl/client.key"
      })
      assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(options.statementTimeout ?? 0)), 2500)
      assert.strictEqual(Duration.toMillis(Duration.fromInputUnsafe(options.connectTimeout)), 500)
      assert.strictEqual(options.poolClass, "queue")
      assert.strictEqual(options.poolSize, 3)
      assert.strictEqual(options.driver, "postgres")
      assert.strictEqual(options.applicationName, "deriver")
    }))

  for (
    const [variable, value] of [
      ["DB_CONNECT_TIMEOUT_SECONDS", "0"],
      ["DB_CONNECT_TIMEOUT_SECONDS", "soon"],
      ["DB_POOL_CLASS", "static"],
      ["DB_POOL_SIZE", "0"],
      ["DB_POOL_SIZE", "2.5"],
      ["DB_DRIVER", "mysql"],
      ["DB_STATEMENT_TIMEOUT_SECONDS", "0"],
      ["DB_STATEMENT_TIMEOUT_SECONDS", "86401"],
      ["DB_STATEMENT_TIMEOUT_SECONDS", "forever"],
      ["DB_SSLMODE", "no-verify"],
      ["DB_SSLMODE", "allow"]
    ] as const
  ) {
    it.effect(`refuses ${variable}=${value} and names the variable`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(read({ DATABASE_URL: "postgres://db/app", [variable]: value }))
        assert.include(error.message, variable)
      }))
  }

  it.effect("requires DATABASE_URL", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(read({}))
      assert.include(error.message, "DATABASE_URL")
    }))

  it.effect("reads the names its caller gives, and nothing else", () =>
    Effect.gen(function*() {
      const other = yield* DbConfig.config({
        ...names,
        url: "TENANT_DB",
        poolSize: "TENANT_DB_POOL"
      }).parse(
        ConfigProvider.fromEnv({ env: { TENANT_DB: "postgres://db/t", TENANT_DB_POOL: "4", DB_POOL_SIZE: "7" } })
      )
      assert.strictEqual(Redacted.value(other.url as Redacted.Redacted<string>), "postgres://db/t")
      assert.strictEqual(other.poolSize, 4)
    }))
})
