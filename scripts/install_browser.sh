#!/usr/bin/env bash
# Install what the browser UI tests (tests/ui/test_browser.py) need: Debian `chromium` and
# `chromium-driver` (apt) and `selenium` in .venv. Idempotent: installs only what is missing.
# Never fails the caller: without apt (or without root) it prints why and exits 0, and the
# browser tests then skip with a clear reason.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=.venv/bin/python

have_browser() {
  { command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; } && [ -x /usr/bin/chromedriver ]
}

if have_browser; then
  echo "install_browser: chromium and chromedriver already installed"
elif ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: apt-get not available; not installing chromium (browser UI tests will skip)"
else
  SUDO=""
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      SUDO="sudo -n"
    else
      echo "install_browser: not root and no passwordless sudo; not installing chromium (browser UI tests will skip)"
      SUDO="skip"
    fi
  fi
  if [ "$SUDO" != "skip" ]; then
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y --no-install-recommends chromium chromium-driver; then
      # The package lists may be missing on a fresh image: refresh once and retry.
      $SUDO apt-get update -q || true
      $SUDO apt-get install -y --no-install-recommends chromium chromium-driver \
        || echo "install_browser: apt-get install chromium chromium-driver failed (browser UI tests will skip)"
    fi
  fi
fi

if [ ! -x "$PY" ]; then
  echo "install_browser: $PY not found (run scripts/setup_env.sh first); not installing selenium"
elif "$PY" -c "import selenium" >/dev/null 2>&1; then
  echo "install_browser: selenium already installed"
else
  "$PY" -m pip install -q "selenium>=4.20" \
    || echo "install_browser: pip install selenium failed (browser UI tests will skip)"
fi
exit 0
