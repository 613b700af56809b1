#!/usr/bin/env bash
# The project's test command: lint, typecheck and every package's Vitest suite (Turbo, per-package cache),
# then one closing line summed from Vitest's own JSON reports, after the command's wall time. Lint and typecheck
# run once over every workspace, not once per package (the same rules, options and files as the packages' own
# `lint` and `typecheck` tasks): the typecheck is one program (tsconfig.workspaces.json), each file checked once
# instead of once per package that imports it; the lint is one oxlint and one dprint. tsc runs single-threaded:
# the tests beside it want the CPU more than tsc gains from its checkers. The root's lint runs after the
# workspaces' (turbo.json): in a fresh clone dprint compiles its wasm plugins first, and two runs at once both did.
# What each choice saved, measured: docs/results/test-suite.md.
set -u
cd "$(dirname "$0")/.."
started=$SECONDS
# Node's on-disk compile cache: the ~25 Vitest runs and the processes tests spawn load the same modules (Vitest,
# Effect, the workspace's TypeScript, its types stripped by Node: vitest.shared.ts); each load after the first skips
# compiling them. It lives in the temporary directory, not in node_modules, so `npm ci`
# (which deletes node_modules) keeps it: entries are keyed by each file's path and checked against its content.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${TMPDIR:-/tmp}/resilience-node-compile-cache}"
find . -path ./node_modules -prune -o -type d -name test-results -prune -exec rm -rf {} +
# Two long suites (the API's, the deriver's) start at once, each in its own Turbo run, beside the rest at
# concurrency 2: Turbo has no priorities and would start them after the packages they depend on, when they are the
# critical path (alternating runs and the timings: docs/results/test-suite.md).
# The scenarios are not here (each package's test/scenarios, vitest.shared.ts): the deriver's real outages and the
# failover lab's switchover, `npm run test:scenarios`, which `.ci/run` runs as their own timed steps after this.
first=(@resilience/deriver @resilience/api-app)
pids=()
for package in "${first[@]}"; do
  turbo run test --filter="$package" --output-logs=new-only "$@" &
  pids+=($!)
done
turbo run //#lint:root //#lint:workspaces //#typecheck:workspaces test "${first[@]/#/--filter=!}" --continue \
  --concurrency=2 --output-logs=new-only "$@"
status=$?
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
echo "lint, typecheck and tests: $((SECONDS - started)) s"
node scripts/test-summary.ts || status=1
exit $status
