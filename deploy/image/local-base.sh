#!/usr/bin/env bash
# Builds a local stand-in for the `node:24.21.0-bookworm-slim` base image where no container registry is
# reachable (only Debian's and npm's): a minimal Debian bookworm root filesystem (debootstrap), Node 24 from the
# npm `node` package the workspace installs, this machine's npm and CA bundle (its registry may be reached through
# a TLS-inspecting proxy), and the `node` account (uid 1000) of the official images. Then:
#
#   buildah bud --isolation chroot --format docker --build-arg NODE_IMAGE=localhost/resilience-node-base:24 \
#     -f deploy/Dockerfile -t localhost/resilience:dev .
#   bash scripts/image-check.sh image localhost/resilience:dev
#
# Needs root, debootstrap and buildah (Debian packages). ROOTFS: an existing debootstrap tree to reuse.
set -euo pipefail
cd "$(dirname "$0")/../.."
rootfs=${ROOTFS:-$(mktemp -d /tmp/resilience-base.XXXXXX)/rootfs}
if [ ! -x "$rootfs/bin/sh" ]; then
  debootstrap --variant=minbase --include=ca-certificates bookworm "$rootfs"
fi
install -m 755 node_modules/node/bin/node "$rootfs/usr/local/bin/node"
rm -rf "$rootfs/usr/local/lib/node_modules/npm"
mkdir -p "$rootfs/usr/local/lib/node_modules"
cp -a "$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" "$rootfs/usr/local/lib/node_modules/npm"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
mkdir -p "$rootfs/usr/local/etc"
echo "cafile=/etc/ssl/certs/ca-certificates.crt" >"$rootfs/usr/local/etc/npmrc"
chroot "$rootfs" sh -c 'getent passwd node >/dev/null || { groupadd -g 1000 node && useradd -u 1000 -g node -m -s /bin/sh node; }'
rm -rf "$rootfs/var/cache/apt/archives"/*.deb "$rootfs/debootstrap"
container=$(buildah from scratch)
buildah copy "$container" "$rootfs" / >/dev/null
buildah config --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt --cmd node "$container"
buildah commit --rm "$container" localhost/resilience-node-base:24
