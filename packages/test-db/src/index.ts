/** Real PostgreSQL (and PgBouncer) for tests: a URL, a container, or embedded binaries from npm. */
export * as Cluster from "./Cluster.ts"
export * as Container from "./Container.ts"
export * as Orphans from "./Orphans.ts"
export * as PgBouncer from "./PgBouncer.ts"
export * as Process from "./Process.ts"
export * as ServerSource from "./ServerSource.ts"
export * as SharedServer from "./SharedServer.ts"
export { TestDatabase } from "./TestDatabase.ts"
