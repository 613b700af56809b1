/**
 * Workspaces: created with a random bearer token that is returned once and stored only as a hash.
 *
 * @since 0.1.0
 */
import { DbSession } from "@resilience/db-session"
import type { DbError } from "@resilience/db-session"
import type { Model } from "@resilience/model"
import type { SchemaName } from "@resilience/schema"
import { Effect, Schema } from "effect"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import * as Statements from "./internal/statements/Workspaces.ts"

/**
 * A workspace with this name exists already.
 *
 * @since 0.1.0
 */
export class WorkspaceExists extends Schema.TaggedError<WorkspaceExists>()("WorkspaceExists", {
  name: Schema.String
}) {
  override get message(): string {
    return `workspace ${JSON.stringify(this.name)} already exists`
  }
}

/**
 * A created workspace and its token (shown once; only its hash is stored).
 *
 * @since 0.1.0
 */
export type Created = Model.CreatedWorkspace

/**
 * The outcome of a token check.
 *
 * @since 0.1.0
 */
export type Verification = "ok" | "forbidden" | "not-found"

/**
 * The stored form of a token: hex SHA-256. Tokens are 256 random bits, so a fast hash is enough.
 *
 * @since 0.1.0
 */
export const hashToken = (token: string): string => createHash("sha256").update(token, "utf8").digest("hex")

const newToken = Effect.sync(() => `ws_${randomBytes(32).toString("base64url")}`)

/**
 * Creates a workspace and returns its token. Fails with {@link WorkspaceExists} when the name is taken.
 *
 * @since 0.1.0
 */
export const create = (
  schema: SchemaName.SchemaName,
  name: string
): Effect.Effect<Created, WorkspaceExists | DbError, DbSession> =>
  Effect.gen(function*() {
    const session = yield* DbSession
    const token = yield* newToken
    const rows = yield* session.query<{ name: string }>(Statements.insertWorkspace(schema), [name, hashToken(token)])
    if (rows.length === 0) return yield* new WorkspaceExists({ name })
    return { name, token }
  }).pipe(Effect.withSpan("Workspaces.create", { attributes: { schema, workspace: name } }))

/**
 * Checks a workspace's bearer token: `ok`, `forbidden` (wrong token) or `not-found` (no such workspace).
 * Compares hashes in constant time.
 *
 * @since 0.1.0
 */
export const verifyToken = (
  schema: SchemaName.SchemaName,
  name: string,
  token: string
): Effect.Effect<Verification, DbError, DbSession> =>
  Effect.gen(function*() {
    const session = yield* DbSession
    const rows = yield* session.query<{ token_hash: string }>(Statements.selectTokenHash(schema), [name])
    const stored = rows[0]
    if (stored === undefined) return "not-found" as const
    const expected = Buffer.from(stored.token_hash, "hex")
    const given = Buffer.from(hashToken(token), "hex")
    return expected.length === given.length && timingSafeEqual(expected, given) ? "ok" as const : "forbidden" as const
  }).pipe(Effect.withSpan("Workspaces.verifyToken", { attributes: { schema, workspace: name } }))

/**
 * Whether a workspace exists.
 *
 * @since 0.1.0
 */
export const exists = (
  schema: SchemaName.SchemaName,
  name: string
): Effect.Effect<boolean, DbError, DbSession> =>
  DbSession.use((session) => session.query(Statements.selectWorkspace(schema), [name])).pipe(
    Effect.map((rows) => rows.length > 0)
  )
