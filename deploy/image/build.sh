#!/usr/bin/env bash
# Builds the image `tollgate` (podman, from scratch): a release build, the
# root staged by stage.sh, then `podman build` with the repository's
# Containerfile (its context only target/image-root, see .containerignore).
# Usage: deploy/image/build.sh [TAG, default tollgate:latest]
# (NO_BUILD=1 uses the release binary already built.)
set -euo pipefail
cd "$(dirname "$0")/../.."

TAG="${1:-tollgate:latest}"
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release -q -p tollgate
fi
bash deploy/image/stage.sh
podman build --quiet -t "$TAG" -f Containerfile .
podman image inspect "$TAG" --format '{{.Size}}' | awk -v tag="$TAG" '{printf "image %s: %.1f MB\n", tag, $1 / 1e6}'
