#!/usr/bin/env bash
# The project's test command: lint, typecheck and every package's Vitest suite (Turbo, per-package cache),
# then one closing line summed from Vitest's own JSON reports, after the command's wall time. The typecheck is
# one program over every workspace (tsconfig.workspaces.json: the same options and files as the packages' own
# `typecheck` tasks, each file checked once instead of once per package that imports it: ~7 s of CPU, not ~100).
set -u
cd "$(dirname "$0")/.."
started=$SECONDS
find . -path ./node_modules -prune -o -type d -name test-results -prune -exec rm -rf {} +
turbo run lint //#lint:root //#typecheck:workspaces test --continue --concurrency=2 --output-logs=new-only "$@"
status=$?
echo "lint, typecheck and tests: $((SECONDS - started)) s"
node scripts/test-summary.ts || status=1
exit $status
