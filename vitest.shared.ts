import { registerHooks } from "node:module"
import { defaultServerConditions } from "vite"
import { configDefaults, defineConfig, type ViteUserConfig } from "vitest/config"

/** The source condition: tests resolve sibling workspace packages to their TypeScript sources, not to dist. */
const source = "@resilience/source"

// Vitest's own process loads each package's global setup with Node's `import`, as the workers load the tests
// (below): it resolves sibling packages to their sources too, as `node --conditions=@resilience/source` would.
registerHooks({
  resolve: (specifier, context, next) => next(specifier, { ...context, conditions: [...context.conditions, source] })
})

/** Where a package keeps its scenarios: real-time runs too long for `npm test`, run by `npm run test:scenarios`. */
const scenarios = "test/scenarios/**/*.test.ts"

/**
 * Shared Vitest settings for every workspace package: sources instead of builds, a JSON report per package
 * (summed by scripts/test-summary.ts into the CI's closing line), and no parallel files where tests start clusters.
 * `vitest run` runs the package's tests except its scenarios; `vitest run --mode scenario` (the package's
 * `test:scenario` script) runs only the scenarios, reporting to test-results/scenario.json.
 */
export const shared = (overrides: ViteUserConfig["test"] = {}) =>
  defineConfig(({ mode }): ViteUserConfig => {
    const scenario = mode === "scenario"
    return {
      // Vitest resolves each import to record the module graph; Node loads the module.
      resolve: { conditions: [source, ...defaultServerConditions] },
      test: {
        include: [scenario ? scenarios : "test/**/*.test.ts"],
        exclude: [...configDefaults.exclude, ...(scenario ? [] : [scenarios])],
        reporters: ["default", "json"],
        outputFile: { json: scenario ? "test-results/scenario.json" : "test-results/vitest.json" },
        // Node's own `import` instead of Vite's module runner: the workers load the TypeScript sources as the apps
        // do (`node --conditions=@resilience/source`, types stripped, Node's compile cache), with no transform in
        // Vitest's process and no transform cache keyed by the checkout's path. The tests use no `vi.mock` and no
        // `import.meta.vitest`, so Vitest's loader hooks are off too. Measured against the module runner, caches
        // emptied, alternating runs: docs/results/test-suite.md.
        experimental: { viteModuleRunner: false, nodeLoader: false },
        execArgv: [`--conditions=${source}`],
        // One worker process runs file after file with its module cache kept (no fork and re-import of Effect and
        // the package per file): tests share no module state they rely on (each builds its layers and services).
        isolate: false,
        testTimeout: 30_000,
        hookTimeout: 120_000,
        ...overrides
      }
    }
  })
