#!/usr/bin/env bash
# Create .venv (if missing) and install marin-dagster with pinned dependencies.
# Idempotent: a second call only checks that the install is complete (it reinstalls when
# pyproject.toml, constraints.txt or setup.py changed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
STAMP=.venv/.marin-installed
WANT="$(cat pyproject.toml constraints.txt setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  .venv/bin/python -m pip install -q -U pip wheel
  # constraints.txt pins every transitive version that was resolved and tested together.
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[test]"
  echo "$WANT" > "$STAMP"
fi
