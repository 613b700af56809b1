/**
 * Reading the repository's TypeScript as the checks need it: without its comments.
 *
 * @since 0.3.0
 */

/**
 * Source text without its comments (block and line comments; string contents are kept, line numbers too: a
 * block comment's lines become empty lines).
 *
 * @since 0.3.0
 * @category reading
 */
export const withoutComments = (source: string): string =>
  source.replace(/\/\*[\s\S]*?\*\//g, (comment) => comment.replace(/[^\n]/g, "")).replace(
    /(^|[^:"'`])\/\/.*$/gm,
    "$1"
  )
