/**
 * Dead letters as an operator acts on them: list, count and replay through `DbSession` (one checkout each),
 * and the operator's command line (`deriver-dead-letters list|replay …`) parsed into a typed {@link Command}.
 * The app wires it to the environment (see apps/deriver).
 *
 * @since 0.3.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Connection, DatabaseUnavailable, QueryFailed } from "@resilience/db-session"
import type { SchemaName } from "@resilience/schema"
import { Data, Effect } from "effect"
import { names } from "./internal/Names.ts"
import { itemOf, query } from "./internal/Rows.ts"
import { decode } from "./internal/RowSchemas.ts"

/**
 * A dead letter: an item whose handler ran out of attempts. It stays unprocessed and is never claimed (its
 * unit's later items go on) until it is replayed.
 *
 * @since 0.3.0
 * @category models
 */
export interface DeadLetter {
  readonly id: string
  readonly workUnitKey: string
  readonly taskType: string
  readonly payload: unknown
  readonly attempts: number
  /** The error of its last attempt. */
  readonly lastError: string | null
  /** When it died (epoch milliseconds). */
  readonly deadAt: number
}

/**
 * Which dead letters a listing or a replay means: one item, a unit's, a task type's, or all.
 *
 * @since 0.3.0
 * @category models
 */
export type DeadLetterSelector =
  | { readonly _tag: "Item"; readonly id: string }
  | { readonly _tag: "Unit"; readonly workUnitKey: string }
  | { readonly _tag: "TaskType"; readonly taskType: string }
  | { readonly _tag: "All" }

/** The selector as a condition on `q` with its parameter in `$n`. */
const selects = (selector: DeadLetterSelector, n: number): { readonly where: string; readonly value: unknown } => {
  switch (selector._tag) {
    case "Item":
      return { where: `q.id = $${n}::bigint`, value: selector.id }
    case "Unit":
      return { where: `q.work_unit_key = $${n}::text`, value: selector.workUnitKey }
    case "TaskType":
      return { where: `q.task_type = $${n}::text`, value: selector.taskType }
    case "All":
      return { where: `$${n}::text IS NULL`, value: null }
  }
}

/**
 * Lists up to `limit` dead letters that `selector` names, oldest first (through the partial index
 * `queue_dead_idx`).
 */
const listOn = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector,
  limit: number
): Effect.Effect<ReadonlyArray<DeadLetter>, QueryFailed | DatabaseUnavailable> => {
  const { value, where } = selects(selector, 1)
  return query(
    connection,
    `SELECT q.id::text AS id, q.work_unit_key, q.task_type, q.payload::text AS payload, q.attempts, q.last_error,
              (extract(epoch FROM q.dead_at) * 1000)::float8 AS dead_at
       FROM ${names(schema).queue} q
       WHERE q.dead_at IS NOT NULL AND NOT q.processed AND ${where}
       ORDER BY q.id LIMIT $2`,
    [value, limit],
    (rows) =>
      rows.map((encoded) => {
        const row = decode.deadLetters.row(encoded)
        return {
          ...itemOf(row, row.work_unit_key, decode.deadLetters.payload),
          lastError: row.last_error,
          deadAt: row.dead_at
        }
      })
  )
}

/**
 * Dead letters by task type (for the queue status and metrics).
 */
const countsOn = (
  connection: Connection,
  schema: SchemaName.SchemaName
): Effect.Effect<ReadonlyMap<string, number>, QueryFailed | DatabaseUnavailable> =>
  query(
    connection,
    `SELECT q.task_type, count(*)::int AS n FROM ${names(schema).queue} q
       WHERE q.dead_at IS NOT NULL AND NOT q.processed GROUP BY 1 ORDER BY 1`,
    [],
    (rows) =>
      new Map(rows.map((encoded) => {
        const row = decode.deadLetterCounts(encoded)
        return [row.task_type, row.n]
      }))
  )

/**
 * Replays the dead letters that `selector` names: back to pending, due at once, attempts reset (the last error
 * stays until the next attempt). Returns how many. A replayed item runs again in its unit's order: before its
 * unit's live items with later ids, after the ones that went on while it was dead.
 */
const replayOn = (
  connection: Connection,
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector
): Effect.Effect<number, QueryFailed | DatabaseUnavailable> => {
  const { value, where } = selects(selector, 1)
  return query(
    connection,
    `UPDATE ${names(schema).queue} q SET dead_at = NULL, run_at = NULL, attempts = 0
       WHERE q.dead_at IS NOT NULL AND NOT q.processed AND ${where} RETURNING 1`,
    [value],
    decode.replay
  )
}

/**
 * Up to `limit` dead letters that `selector` names, oldest first.
 *
 * @since 0.3.0
 * @category effects
 */
export const list = (
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector,
  limit: number
): Effect.Effect<ReadonlyArray<DeadLetter>, DbError, DbSession> =>
  DbSession.use((db) => db.withConnection((connection) => listOn(connection, schema, selector, limit)))

/**
 * Dead letters by task type.
 *
 * @since 0.3.0
 * @category effects
 */
export const counts = (schema: SchemaName.SchemaName): Effect.Effect<ReadonlyMap<string, number>, DbError, DbSession> =>
  DbSession.use((db) => db.withConnection((connection) => countsOn(connection, schema)))

/**
 * Replays the dead letters that `selector` names (back to pending, attempts reset); returns how many.
 *
 * @since 0.3.0
 * @category effects
 */
export const replay = (
  schema: SchemaName.SchemaName,
  selector: DeadLetterSelector
): Effect.Effect<number, DbError, DbSession> =>
  DbSession.use((db) => db.withConnection((connection) => replayOn(connection, schema, selector))).pipe(
    Effect.tap((replayed) =>
      Effect.logInfo("replayed dead letters").pipe(Effect.annotateLogs({ schema, selector: selector._tag, replayed }))
    )
  )

/**
 * An operator's command: list (at most `limit`) or replay the dead letters a selector names.
 *
 * @since 0.3.0
 * @category models
 */
export type Command =
  | { readonly _tag: "List"; readonly selector: DeadLetterSelector; readonly limit: number }
  | { readonly _tag: "Replay"; readonly selector: DeadLetterSelector }

/**
 * A command line that is not a {@link Command}: what was wrong and what the usage is.
 *
 * @since 0.3.0
 * @category errors
 */
export class InvalidCommand extends Data.TaggedError("InvalidCommand")<{ readonly reason: string }> {
  override get message() {
    return `${this.reason}\n${usage}`
  }
}

/**
 * The command line's usage.
 *
 * @since 0.3.0
 * @category constants
 */
export const usage =
  `usage: deriver-dead-letters list [--id ID | --unit KEY | --task-type TYPE] [--limit N (default 100)]
       deriver-dead-letters replay (--id ID | --unit KEY | --task-type TYPE | --all)`

/**
 * Parses a command line (the arguments after the program's name). A replay names what it replays (`--all` for
 * everything); a list without a selector lists all.
 *
 * @since 0.3.0
 * @category effects
 */
export const parse = (argv: ReadonlyArray<string>): Effect.Effect<Command, InvalidCommand> =>
  Effect.gen(function*() {
    const [verb, ...rest] = argv
    if (verb !== "list" && verb !== "replay") {
      return yield* new InvalidCommand({ reason: `expected "list" or "replay", got ${JSON.stringify(verb ?? "")}` })
    }
    const selectors: Array<DeadLetterSelector> = []
    let limit = 100
    for (let i = 0; i < rest.length; i++) {
      const flag = rest[i]!
      if (flag === "--all") {
        selectors.push({ _tag: "All" })
        continue
      }
      const value = rest[i + 1]
      if (value === undefined || value.startsWith("--")) {
        return yield* new InvalidCommand({ reason: `${flag} needs a value` })
      }
      i++
      switch (flag) {
        case "--id":
          if (!/^[1-9][0-9]{0,18}$/.test(value)) {
            return yield* new InvalidCommand({ reason: `--id must be an item id (a positive integer), got ${value}` })
          }
          selectors.push({ _tag: "Item", id: value })
          break
        case "--unit":
          selectors.push({ _tag: "Unit", workUnitKey: value })
          break
        case "--task-type":
          selectors.push({ _tag: "TaskType", taskType: value })
          break
        case "--limit":
          if (verb !== "list" || !/^[1-9][0-9]{0,5}$/.test(value)) {
            return yield* new InvalidCommand({ reason: `--limit must be an integer in [1, 999999] and only for list` })
          }
          limit = Number(value)
          break
        default:
          return yield* new InvalidCommand({ reason: `unknown option ${flag}` })
      }
    }
    if (selectors.length > 1) {
      return yield* new InvalidCommand({ reason: "name one of --id, --unit, --task-type, --all" })
    }
    const selector = selectors[0]
    if (verb === "replay") {
      if (selector === undefined) {
        return yield* new InvalidCommand({ reason: "replay needs --id, --unit, --task-type or --all" })
      }
      return { _tag: "Replay", selector } as const
    }
    return { _tag: "List", selector: selector ?? { _tag: "All" }, limit } as const
  })

/**
 * Runs a command; returns the lines to print (a list: one JSON object per dead letter; a replay: how many).
 *
 * @since 0.3.0
 * @category effects
 */
export const run = (
  schema: SchemaName.SchemaName,
  command: Command
): Effect.Effect<ReadonlyArray<string>, DbError, DbSession> =>
  command._tag === "List"
    ? Effect.map(list(schema, command.selector, command.limit), (letters) => letters.map((l) => JSON.stringify(l)))
    : Effect.map(replay(schema, command.selector), (n) => [`replayed ${n} dead letter${n === 1 ? "" : "s"}`])
