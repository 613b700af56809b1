#!/usr/bin/env bash
# The project's test command: lint, typecheck and every package's Vitest suite (Turbo, per-package cache),
# then one closing line summed from Vitest's own JSON reports, after the command's wall time.
set -u
cd "$(dirname "$0")/.."
started=$SECONDS
find . -path ./node_modules -prune -o -type d -name test-results -prune -exec rm -rf {} +
turbo run lint //#lint:root typecheck test --continue --concurrency=2 --output-logs=new-only "$@"
status=$?
echo "lint, typecheck and tests: $((SECONDS - started)) s"
node scripts/test-summary.ts || status=1
exit $status
