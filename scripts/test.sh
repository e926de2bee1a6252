#!/usr/bin/env bash
# README command (2): set everything up, then run the whole test suite.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$KCOMPACT_ROOT"
python -m ruff check --quiet .  # the lint pyproject.toml configures; a finding fails the run
exec python -m pytest "$@"
