/**
 * The product's tables, as versioned migrations for `Migrator` of `@resilience/schema` (component `domain`).
 *
 * @since 0.1.0
 */
import type { Migrator } from "@resilience/schema"
import * as Workspaces from "./internal/migrations/0001-workspaces.ts"
import * as PeerRepresentations from "./internal/migrations/0002-peer-representations.ts"
import * as QueueByWorkspace from "./internal/migrations/0003-queue-by-workspace.ts"
import * as IdempotencyKeys from "./internal/migrations/0004-idempotency-keys.ts"
import * as QueueCounts from "./internal/migrations/0005-queue-counts.ts"
import * as MessageSeq from "./internal/migrations/0006-message-seq.ts"
import * as MessageSeqAssign from "./internal/migrations/0007-message-seq-assign.ts"

/**
 * The domain migrations: workspaces (token stored hashed), sessions, messages, peer representations with their
 * term counts and per-session progress, an index of queue items by workspace for the status endpoint, the
 * idempotency keys of writes, the status counts without a scan of history (a partial index of the backlog
 * by workspace, counters of processed and errored items kept by triggers), a gap-free sequence per session
 * and peer that orders messages by commit, and that sequence drawn for a writer that does not number its rows.
 *
 * Each migration's SQL is its own file under `src/internal/migrations/`; a released migration never changes
 * (test/ReleasedMigrations.test.ts fails when one does).
 *
 * @since 0.1.0
 */
export const migrations: ReadonlyArray<Migrator.Migration> = [
  Workspaces.migration,
  PeerRepresentations.migration,
  QueueByWorkspace.migration,
  IdempotencyKeys.migration,
  QueueCounts.migration,
  MessageSeq.migration,
  MessageSeqAssign.migration
]

/**
 * The domain as a `Migrator.Component`; it runs after the queue's (its last migration indexes the queue).
 *
 * @since 0.1.0
 */
export const component: Migrator.Component = { name: "domain", migrations }
