#!/usr/bin/env bash
# Build the project's images (Apache Kafka, and the compactor) with the Docker engine that answers, without a
# registry: on a Debian base made here with mmdebstrap. --base-from-registry builds on public images instead.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$KCOMPACT_ROOT"
exec python scripts/build_images.py "$@"
