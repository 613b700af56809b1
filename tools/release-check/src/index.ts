/**
 * `@resilience/release-check`: the checks of a release, run by CI and by `npm run release`.
 *
 * @since 0.1.0
 */

/**
 * The release records (`releases/*.json`).
 *
 * @since 0.1.0
 */
export * as Releases from "./Releases.ts"

/**
 * The workspaces and which of them a release publishes.
 *
 * @since 0.1.0
 */
export * as Workspaces from "./Workspaces.ts"

/**
 * Every change to a published package named by a changeset.
 *
 * @since 0.1.0
 */
export * as Changes from "./Changes.ts"

/**
 * What a tarball would publish, checked.
 *
 * @since 0.1.0
 */
export * as PublishCheck from "./PublishCheck.ts"

/**
 * Two versions live: the previous release's apps beside this tree's.
 *
 * @since 0.1.0
 */
export * as TwoVersions from "./TwoVersions.ts"
