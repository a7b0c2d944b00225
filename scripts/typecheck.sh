#!/usr/bin/env bash
# Type-check the product code (marin_assets, marin_resources, definitions.py) with mypy (pinned in the
# `test` extra); fails on an error that is not in scripts/mypy_baseline.txt. Run by scripts/test.sh.
#   bash scripts/typecheck.sh            # check
#   bash scripts/typecheck.sh --update   # after fixing errors: write the smaller baseline
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/typecheck.py "$@"
