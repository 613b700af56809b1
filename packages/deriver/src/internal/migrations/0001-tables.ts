/**
 * Queue migration 1 (released in 0.1.0; frozen): the items and the ownership rows, whose unique key makes a claim
 * exclusive across instances.
 *
 * @internal
 */
import type { Migrator } from "@resilience/schema"
import * as Names from "../Names.ts"

export const migration: Migrator.Migration = Names.migration(1, "queue and ownership tables", ({ queue, sessions }) => [
  `CREATE TABLE ${queue} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        work_unit_key text NOT NULL,
        task_type text NOT NULL,
        payload jsonb NOT NULL DEFAULT '{}'::jsonb,
        processed boolean NOT NULL DEFAULT false,
        error text,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
  `CREATE TABLE ${sessions} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        work_unit_key text NOT NULL UNIQUE,
        owner text NOT NULL DEFAULT '',
        last_updated timestamptz NOT NULL DEFAULT now()
      )`
])
