/**
 * The domain's work unit keys (the names themselves are `@resilience/model`'s `Names`).
 *
 * @since 0.1.0
 */

/**
 * The work unit key of a peer's representation work in a session:
 * `representation:{workspace}:{session}:{peer}` (each part URI-encoded so that `:` cannot blur the parts).
 *
 * @since 0.1.0
 */
export const representationUnit = (workspace: string, session: string, peer: string): string =>
  `representation:${encodeURIComponent(workspace)}:${encodeURIComponent(session)}:${encodeURIComponent(peer)}`
