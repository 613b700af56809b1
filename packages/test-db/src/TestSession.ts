/**
 * A database session on the suite's own database ({@link TestDatabase}), as most suites want it: the in-process
 * pool (`queue`, for speed), `pg`, a 2 s connect timeout, and only errors logged.
 */
import { type DbConfig, DbSession } from "@resilience/db-session"
import { Layer, References } from "effect"
import { TestDatabase } from "./TestDatabase.ts"

/** What a suite's session takes unless told otherwise (12 connections at the most). */
export const defaults: Omit<DbConfig.Options, "url"> = {
  connectTimeout: "2 seconds",
  poolClass: "queue",
  poolSize: 12,
  driver: "pg"
}

/** A `DbSession` on a fresh database of the shared server ({@link defaults} with `options`), and the `TestDatabase`. */
export const layer = (options: Partial<Omit<DbConfig.Options, "url">> = {}) =>
  TestDatabase.layerWith((database) => DbSession.layer({ ...defaults, ...options, url: database.url })).pipe(
    Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error"))
  )
