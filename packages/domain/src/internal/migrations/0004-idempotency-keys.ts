/**
 * Domain migration 4 (released in 0.2.0; frozen): the idempotency keys of writes, and their index by age for the
 * pruning.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(4, "idempotency keys", ({ idempotencyKeys }) => [
  `CREATE TABLE ${idempotencyKeys} (
        workspace text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        response jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace, key)
      )`,
  `CREATE INDEX idempotency_keys_created_at_idx ON ${idempotencyKeys} (created_at)`
])
