/**
 * The launcher's own settings, from the environment. The apps read theirs (DB_*, DERIVER_*, API_*) themselves;
 * the launcher passes the environment through.
 */
import { Variables } from "@resilience/environment"
import { Config, Option } from "effect"
import { resolve } from "node:path"
import { repositoryRoot } from "./Stack.ts"

/** Settings of `npm start`. */
export const config = Config.all({
  databaseUrl: Config.option(Config.String(Variables.database.url)),
  apiPort: Config.Port(Variables.api.port).pipe(Config.withDefault(8000)),
  deriverMetricsPort: Config.Port(Variables.deriverApp.metricsPort).pipe(Config.withDefault(9091)),
  embeddedPort: Config.Port("EMBEDDED_POSTGRES_PORT").pipe(Config.withDefault(54329)),
  // relative to the repository's root (where `npm start` runs), so the default reads the same given or not
  dataDirectory: Config.String("RESILIENCE_DATA_DIR").pipe(
    Config.withDefault(".data"),
    Config.map((directory) => resolve(repositoryRoot, directory))
  ),
  adminToken: Config.option(Config.String(Variables.api.adminToken)),
  schema: Config.String(Variables.schema).pipe(Config.withDefault("public"))
})

/** The resolved settings. */
export type LocalConfig = typeof config extends Config.Config<infer A> ? A : never

/** Whether the database is embedded (no DATABASE_URL). */
export const isEmbedded = (local: LocalConfig): boolean => Option.isNone(local.databaseUrl)
