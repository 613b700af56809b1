/**
 * Domain migration 3 (released in 0.2.0; frozen): the queue's items by workspace, for the status endpoint.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import { names } from "../Names.ts"

export const migration: Migrator.Migration = {
  version: 3,
  name: "queue items by workspace",
  up: (schema) => [
    `CREATE INDEX queue_workspace_idx ON ${names(schema).queue} ((payload ->> 'workspace'))`
  ]
}
