/**
 * The statements of `Workspaces`.
 *
 * @internal
 */
import { perSchema } from "../Names.ts"

/** Creates workspace `$1` with token hash `$2`; returns its name, or no row when the name is taken. */
export const insertWorkspace = perSchema(({ workspaces }) =>
  `INSERT INTO ${workspaces} (name, token_hash) VALUES ($1, $2)
ON CONFLICT (name) DO NOTHING RETURNING name`
)

/** The token hash of workspace `$1` (no row: no such workspace). */
export const selectTokenHash = perSchema(({ workspaces }) => `SELECT token_hash FROM ${workspaces} WHERE name = $1`)

/** One row when workspace `$1` exists. */
export const selectWorkspace = perSchema(({ workspaces }) => `SELECT 1 FROM ${workspaces} WHERE name = $1`)
