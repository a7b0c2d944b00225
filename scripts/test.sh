#!/usr/bin/env bash
# Set up the environment and run the fast test suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export MARIN_RAY_TMPDIR="${MARIN_RAY_TMPDIR:-/tmp/marin-ray-test-$$}"
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
