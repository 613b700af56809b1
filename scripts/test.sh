#!/usr/bin/env bash
# The project's test command: lint, typecheck and every package's Vitest suite (Turbo, per-package cache),
# then one closing line summed from Vitest's own JSON reports, after the command's wall time. Lint and typecheck
# run once over every workspace, not once per package (the same rules, options and files as the packages' own
# `lint` and `typecheck` tasks): the typecheck is one program (tsconfig.workspaces.json), each file checked once
# instead of once per package that imports it (~5 s of CPU, not ~100); the lint is one oxlint and one dprint
# (~2 s, not ~35). tsc runs single-threaded: 5.2 s of CPU and 4.5 s of wall against 7.7 s and 4.1 s with its four
# checkers, and the tests beside it want the CPU. The root's lint runs after the workspaces' (turbo.json): in a
# fresh clone dprint compiles its three wasm plugins first (~6 s of CPU), and two runs at once both did.
set -u
cd "$(dirname "$0")/.."
started=$SECONDS
# Node's on-disk compile cache: the ~25 Vitest runs and the processes tests spawn load the same modules (Vitest,
# Effect, the workspace's TypeScript, its types stripped by Node: vitest.shared.ts); each load after the first skips
# compiling them (~0.3 s of CPU a process). It lives in the temporary directory, not in node_modules, so `npm ci`
# (which deletes node_modules) keeps it: entries are keyed by each file's path and checked against its content.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${TMPDIR:-/tmp}/resilience-node-compile-cache}"
find . -path ./node_modules -prune -o -type d -name test-results -prune -exec rm -rf {} +
# Two long suites (the API's, the deriver's) start at once, each in its own Turbo run, beside the rest at
# concurrency 2: Turbo has no priorities and would start them after the packages they depend on, when they are the
# critical path (the API's started at +104 to +142 s and ended the run). Alternating runs: 188 and 169 s against
# 169 and 207 s; a run's CPU varies by a quarter on this machine, so per second of CPU: 0.53 against 0.56
# (docs/results/test-suite.md). In a fresh clone at f257ca0 the API's took 65 s from +0 of a 129 s run, the
# deriver's 35 s (126 s before its real outages became scenarios).
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
