/**
 * `@resilience/model`: the API's public values and names as `Schema`s, shared by the server's domain, the
 * contract and clients.
 *
 * @since 0.1.0
 */

/**
 * Workspaces, messages, appends, queue counts, representations.
 *
 * @since 0.1.0
 */
export * as Model from "./Model.ts"

/**
 * Workspace, session and peer names.
 *
 * @since 0.1.0
 */
export * as Names from "./Names.ts"
