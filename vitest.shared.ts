import { createHash } from "node:crypto"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { defaultServerConditions } from "vite"
import { defineConfig, type ViteUserConfig } from "vitest/config"

/** The source condition: tests resolve sibling workspace packages to their TypeScript sources, not to dist. */
const conditions = ["@resilience/source", ...defaultServerConditions]

/**
 * Vitest's cache of transformed modules, kept out of node_modules (where `npm ci` would delete it) in the temporary
 * directory, one per checkout (the key holds the checkout's path; Vitest drops it when the lockfile changes).
 */
const moduleCache = join(
  tmpdir(),
  "resilience-vitest-cache",
  createHash("sha256").update(import.meta.dirname).digest("hex").slice(0, 16)
)

/**
 * Shared Vitest settings for every workspace package: sources instead of builds, a JSON report per package
 * (summed by scripts/test-summary.ts into the CI's closing line), and no parallel files where tests start clusters.
 */
export const shared = (overrides: ViteUserConfig["test"] = {}): ViteUserConfig =>
  defineConfig({
    resolve: { conditions },
    ssr: { resolve: { conditions, externalConditions: conditions } },
    // The global setup runs in Vitest's own environment: it resolves sibling packages to their sources too.
    environments: { __vitest__: { resolve: { conditions, externalConditions: conditions } } },
    test: {
      include: ["test/**/*.test.ts"],
      reporters: ["default", "json"],
      outputFile: { json: "test-results/vitest.json" },
      // One worker process runs file after file with its module cache kept (no fork and re-import of Effect and
      // the package per file): tests share no module state they rely on (each builds its layers and services).
      isolate: false,
      fsModuleCachePath: moduleCache,
      testTimeout: 30_000,
      hookTimeout: 120_000,
      ...overrides
    }
  })
