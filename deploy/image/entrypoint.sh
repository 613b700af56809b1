#!/bin/sh
# The image's command: `api` (the HTTP API), `deriver` (the queue worker) or `migrate` (migrate DB_SCHEMA once,
# exit 0 / 75 retry later / 78 misconfigured / 1 failed). `exec` makes node PID 1, so SIGTERM reaches it.
set -eu
app="$(dirname "$0")/node_modules/@resilience"
case "${1:-api}" in
  api) exec node "$app/api-app/dist/main.js" ;;
  deriver) exec node "$app/deriver-app/dist/main.js" ;;
  migrate) exec node "$app/api-app/dist/migrate.js" ;;
  *)
    echo "usage: entrypoint.sh api|deriver|migrate (got: $1)" >&2
    exit 64
    ;;
esac
