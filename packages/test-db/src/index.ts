/**
 * What tests need around a real PostgreSQL: the shared server's source, a database per suite, PgBouncer, the
 * counting proxy and the network stand-ins. Running the server itself is @resilience/local-postgres.
 */
export * as Certificates from "./Certificates.ts"
export * as ClosedPort from "./ClosedPort.ts"
export * as CountingProxy from "./CountingProxy.ts"
export * as EntryPoint from "./EntryPoint.ts"
export * as Eventually from "./Eventually.ts"
export * as HttpStandIn from "./HttpStandIn.ts"
export * as PgBouncer from "./PgBouncer.ts"
export * as SilentListener from "./SilentListener.ts"
export * as SupavisorStandIn from "./SupavisorStandIn.ts"
export * as TableLock from "./TableLock.ts"
export { TestDatabase } from "./TestDatabase.ts"
export * as TestSession from "./TestSession.ts"
