#!/usr/bin/env bash
# Create a project-local Dagster instance directory (SQLite) with the settings marin-dagster needs.
# Usage: bash scripts/dagster_home.sh DIR
set -euo pipefail
home="$1"
mkdir -p "$home"
if [ ! -f "$home/dagster.yaml" ]; then
  cat > "$home/dagster.yaml" <<'YAML'
telemetry:
  enabled: false
# Curation runs of data drops go one at a time, in the order the landing sensor requested them:
# dedup of a drop needs the indices of every earlier drop.
run_queue:
  max_concurrent_runs: 4
  # The daemon starts queued runs every second (Dagster's default is 5 s: a UI run waited 2.5 s
  # on average before its run worker started; bench/ui_run).
  dequeue_interval_seconds: 1
  tag_concurrency_limits:
    - key: marin/curation
      limit: 1
YAML
fi
