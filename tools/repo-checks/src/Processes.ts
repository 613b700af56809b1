/**
 * The configuration each process reads at start, whole, as the processes themselves compose it: the API
 * (`apps/api`), the deriver (`apps/deriver`) and `npm start` (the launcher). The configuration-table test runs
 * the README's claims through these.
 *
 * @since 0.1.0
 */
import { Settings as ApiSettings } from "@resilience/api-app"
import { DbConfig } from "@resilience/db-session"
import { DeriverConfig } from "@resilience/deriver"
import { App as DeriverApp } from "@resilience/deriver-app"
import { Variables } from "@resilience/environment"
import * as LocalConfig from "@resilience/launcher/LocalConfig"
import { SchemaName } from "@resilience/schema"
import { Otlp } from "@resilience/telemetry"
import { Config } from "effect"

/**
 * A process, by the name the README's "used by" column gives it, and everything it reads from the environment.
 *
 * @since 0.1.0
 */
export const processes: Readonly<Record<string, Config.Config<unknown>>> = {
  API: Config.all({
    settings: ApiSettings.config,
    logLevel: ApiSettings.logLevelConfig,
    database: DbConfig.config(Variables.database),
    telemetry: Otlp.config("resilience-api")
  }),
  deriver: Config.all({
    deriver: DeriverConfig.config(Variables.deriver),
    app: DeriverApp.appConfig,
    schema: SchemaName.config(Variables.schema),
    database: DbConfig.config(Variables.database),
    telemetry: Otlp.config("resilience-deriver")
  }),
  "npm start": Config.all({
    local: LocalConfig.config,
    telemetry: Otlp.config("resilience-launcher")
  })
}

/**
 * The processes a "used by" entry means: `all` is every process that opens a database session.
 *
 * @since 0.1.0
 */
export const readersOf = (usedBy: string): ReadonlyArray<string> => usedBy === "all" ? ["API", "deriver"] : [usedBy]

/**
 * What every process needs set to start at all (the required variables), so a probe tests one variable.
 *
 * @since 0.1.0
 */
export const baseEnvironment: Readonly<Record<string, string>> = {
  DATABASE_URL: "postgres://check@127.0.0.1:1/check",
  API_ADMIN_TOKEN: "a-token-of-enough-length",
  // with an endpoint set, the telemetry settings show in what the processes read
  OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318"
}
