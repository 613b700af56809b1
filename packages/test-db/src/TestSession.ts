/**
 * A database session on the suite's own database ({@link TestDatabase}), as most suites want it: the in-process
 * pool (`queue`, for speed), `pg`, a 2 s connect timeout, and only errors logged. The session's constructor comes
 * from the caller (`DbSession.layer`): test-db does not depend on db-session, whose own tests depend on test-db.
 */
import { Layer, References } from "effect"
import { TestDatabase } from "./TestDatabase.ts"

/** What a suite's session takes unless told otherwise (12 connections at the most). */
export const defaults = {
  connectTimeout: "2 seconds",
  poolClass: "queue",
  poolSize: 12,
  driver: "pg"
} as const

/**
 * A session made by `make` (`DbSession.layer`) on a fresh database of the shared server, with {@link defaults} and
 * `options`, and the `TestDatabase`.
 */
export const layer = <Options extends object, A, E, R>(
  make: (options: Omit<typeof defaults, keyof Options> & Options & { readonly url: string }) => Layer.Layer<A, E, R>,
  options: Options = {} as Options
) =>
  TestDatabase.layerWith((database) => make({ ...defaults, ...options, url: database.url })).pipe(
    Layer.provideMerge(Layer.succeed(References.MinimumLogLevel, "Error"))
  )
