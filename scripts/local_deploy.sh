#!/usr/bin/env bash
# The production topology of k8s/ on one machine, 127.0.0.1 only: Postgres, a GCS API emulator,
# a Ray cluster (head + --ray_workers N worker nodes, default 1, reached over ray://), the code server (reloads),
# dagster-webserver and dagster-daemon. See docs/deploy.md.
#
#   bash scripts/local_deploy.sh                 # up (UI on http://127.0.0.1:3000)
#   eval "$(bash scripts/local_deploy.sh env)"   # point this shell at it (MARIN_PREFIX=gs://..., RAY_ADDRESS=ray://...)
#   bash scripts/local_deploy.sh reload          # Reload definitions after editing a team script
#   bash scripts/local_deploy.sh restart-code    # restart just the code server (e.g. new packages)
#   bash scripts/local_deploy.sh --down          # stop everything it started, by pid
#   --project_root DIR (or $MARIN_PROJECT_ROOT): the team's experiments repository
#   --ray_workers N --worker_cpus C: N Ray worker nodes of C logical CPUs each (steps spread over them)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh >&2
exec .venv/bin/python -m marin_resources.deploy.local "$@"
