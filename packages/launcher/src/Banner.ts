/**
 * What `npm start` prints once the system is ready: where everything is, the tokens, and curl commands that
 * post a message and read the derived representation back.
 */
import type { Workspace } from "./DemoWorkspace.ts"
import type { Stack } from "./Stack.ts"

/** The ready banner, as lines of text. */
export const render = (options: {
  readonly stack: Stack
  readonly dataDirectory: string
  readonly adminToken: string
  readonly adminTokenGenerated: boolean
  readonly workspace: Workspace
}): string => {
  const { stack, workspace } = options
  const messages = `${stack.apiUrl}/v1/workspaces/${workspace.name}/sessions/welcome/messages`
  const database = stack.embedded
    ? `embedded PostgreSQL, data in ${options.dataDirectory}/postgres (delete it to start fresh)`
    : "DATABASE_URL"
  return [
    "",
    "ready",
    `  API              ${stack.apiUrl}   (OpenAPI: ${stack.apiUrl}/docs, metrics: ${stack.apiUrl}/metrics)`,
    `  deriver metrics  ${stack.deriverMetricsUrl}`,
    `  wake             ${
      stack.wakeUrl === ""
        ? "off (API_WAKE_URL is empty)"
        : `${stack.wakeUrl} (the API wakes the deriver after each write)`
    }`,
    `  database         ${database}`,
    `  admin token      ${options.adminToken}${
      options.adminTokenGenerated ? "   (generated; set API_ADMIN_TOKEN to choose one)" : ""
    }`,
    `  workspace        ${workspace.name}, token ${workspace.token}`,
    "",
    stack.wakeUrl === ""
      ? "Post a message, then read what the deriver made of it (API_WAKE_URL is off: the next poll, up to 45 s):"
      : "Post a message, then read what the deriver made of it: the API wakes the deriver, so it is derived within milliseconds:",
    "",
    `  curl -sS -X POST ${messages} \\`,
    `    -H 'authorization: Bearer ${workspace.token}' -H 'content-type: application/json' \\`,
    `    -d '{"messages":[{"peer":"alice","content":"Postgres poolers drain when clients stop retrying"}]}'`,
    "",
    `  curl -sS ${stack.apiUrl}/v1/workspaces/${workspace.name}/peers/alice/representation \\`,
    `    -H 'authorization: Bearer ${workspace.token}'`,
    "",
    "Ctrl-C (or SIGTERM) stops the deriver, the API, then the database.",
    ""
  ].join("\n")
}
