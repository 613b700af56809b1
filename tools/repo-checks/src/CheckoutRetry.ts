/**
 * The regression guard of the spec's change 3 as a repository check: the code that makes a checkout (the
 * db-session package) contains no retry mechanism and depends on no retry library.
 *
 * @since 0.1.0
 */
import { withoutComments } from "./Source.ts"

/**
 * What the code (comments removed) may not contain: an identifier or word with retry or back-off in it
 * (`Effect.retry` included), Effect's `Schedule`, and `Effect.repeat`.
 *
 * @since 0.1.0
 */
export const forbidden: RegExp = /[\w$]*(retr(y|ies|ying|ied)|back-?off)[\w$]*|\bSchedule\b|\.repeat\w*/gi

/**
 * Packages whose only purpose is to retry.
 *
 * @since 0.1.0
 */
export const retryLibraries: ReadonlyArray<string> = [
  "async-retry",
  "exponential-backoff",
  "p-retry",
  "promise-retry",
  "retry",
  "ts-retry-promise"
]

/**
 * The forbidden words of one source file, with the line each is on (1-based).
 *
 * @since 0.1.0
 */
export const findings = (source: string): ReadonlyArray<{ readonly line: number; readonly text: string }> =>
  withoutComments(source).split("\n").flatMap((text, index) =>
    [...text.matchAll(forbidden)].map((match) => ({ line: index + 1, text: match[0] }))
  )

/**
 * The retry libraries among a package.json's dependencies.
 *
 * @since 0.1.0
 */
export const retryDependencies = (packageJson: {
  readonly dependencies?: Record<string, string> | undefined
  readonly peerDependencies?: Record<string, string> | undefined
}): ReadonlyArray<string> =>
  Object.keys({ ...packageJson.dependencies, ...packageJson.peerDependencies }).filter((name) =>
    retryLibraries.includes(name)
  )
