#!/usr/bin/env bash
# Builds deploy/Dockerfile with buildah (daemonless, `--isolation chroot`) and runs the API and the deriver from
# the image (scripts/image-check.sh image). The official Node base image cannot be pulled where only the npm and
# Debian registries are reachable, so the base is NODE_IMAGE (default: the local stand-in that
# deploy/image/local-base.sh makes). Without buildah or without that base image, says why and exits 0: the
# Dockerfile's stages are then checked as shell steps by `scripts/image-check.sh layout`. Prints its times.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${NODE_IMAGE:-localhost/resilience-node-base:24}
tag=localhost/resilience:check
if ! command -v buildah >/dev/null 2>&1; then
  echo "image-build: skipped: no buildah (Debian: apt-get install buildah)"
  exit 0
fi
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  echo "image-build: skipped: no base image $base (bash deploy/image/local-base.sh makes one from Debian packages)"
  exit 0
fi
started=$(date +%s)
log=$(mktemp /tmp/resilience-image-build.XXXXXX.log)
if ! buildah bud --isolation chroot --format docker --layers=false --build-arg NODE_IMAGE="$base" \
  -f deploy/Dockerfile -t "$tag" . >"$log" 2>&1; then
  tail -30 "$log" >&2
  echo "image-build: FAIL: buildah bud" >&2
  exit 1
fi
rm -f "$log"
echo "image-build: built $tag in $(($(date +%s) - started)) s, $(buildah images --format '{{.Size}}' "$tag")"
trap 'buildah rmi "$tag" >/dev/null 2>&1 || true' EXIT
bash scripts/image-check.sh image "$tag"
