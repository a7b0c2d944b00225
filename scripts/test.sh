#!/usr/bin/env bash
# Set up the environment and run the test suite (the README's test command).
#   bash scripts/test.sh            # fast suite
#   bash scripts/test.sh -m slow    # slow suite: end-to-end, resume, UI (headless Chromium), deployment
# Installs Debian chromium + chromedriver (apt) and selenium for the UI tests when missing; without
# root or apt it says so and the browser tests skip naming what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
bash scripts/install_browser.sh
export MARIN_RAY_TMPDIR="${MARIN_RAY_TMPDIR:-/tmp/marin-ray-test-$$}"
.venv/bin/ruff check .
bash scripts/typecheck.sh  # mypy on the product code, against scripts/mypy_baseline.txt
exec .venv/bin/python -m pytest "$@"
