#!/usr/bin/env bash
# README command (1): set everything up, then run the demo on an embedded local broker.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$KCOMPACT_ROOT"
exec kcompact demo "$@"
