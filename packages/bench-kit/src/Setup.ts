/**
 * What a bench reads from its environment: its comma-separated settings (`BENCH_PHASES=pickup,burst`) and the
 * database it runs against (`DATABASE_URL`, or else an embedded PostgreSQL of its own).
 *
 * @since 0.1.0
 */
import { Cluster } from "@resilience/local-postgres"
import { Console, Effect } from "effect"

/**
 * The comma-separated values of the environment variable `name` (or of `fallback` when it is unset), trimmed,
 * empty ones left out.
 *
 * @since 0.1.0
 * @category settings
 */
export const list = (name: string, fallback: string): ReadonlyArray<string> =>
  (process.env[name] ?? fallback).split(",").map((value) => value.trim()).filter((value) => value !== "")

/**
 * `DATABASE_URL` when it is set and not empty; otherwise an embedded PostgreSQL cluster started with `options`
 * (saying so), stopped and removed when the scope closes.
 *
 * @since 0.1.0
 * @category settings
 */
export const databaseUrl = (options: Cluster.Options) =>
  Effect.gen(function*() {
    const url = process.env.DATABASE_URL
    if (url !== undefined && url !== "") return url
    yield* Console.log("starting an embedded PostgreSQL cluster…")
    return (yield* Cluster.start(options)).url
  })
