/**
 * The workspace `npm start` creates for the newcomer: created once through the API with the admin token,
 * its token kept in the data directory so the printed curl commands keep working across runs.
 */
import type { ApiClient, ClientErrors } from "@resilience/api-client"
import { Effect, Schema } from "effect"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** A workspace and the bearer token for its routes. */
export const Workspace = Schema.Struct({ name: Schema.String, token: Schema.String })
export type Workspace = typeof Workspace.Type

const decode = Schema.decodeUnknownSync(Workspace)

/** Creates `name` through the API client (or reuses the one this directory remembers); yields its token. */
export const ensure = (options: {
  readonly client: ApiClient.ApiClient
  readonly adminToken: string
  readonly directory: string
  readonly name: string
}): Effect.Effect<Workspace, ClientErrors.ClientError> =>
  Effect.gen(function*() {
    mkdirSync(options.directory, { recursive: true })
    const file = join(options.directory, `workspace-${options.name}.json`)
    if (existsSync(file)) return decode(JSON.parse(readFileSync(file, "utf8")))
    const workspace = yield* options.client.createWorkspace({ adminToken: options.adminToken, name: options.name })
    writeFileSync(file, `${JSON.stringify(workspace, null, 2)}\n`, { mode: 0o600 })
    return workspace
  })
