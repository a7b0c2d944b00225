#!/usr/bin/env bash
# Set up the environment and run the main job (the quickstart pipeline) on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export MARIN_PREFIX="${MARIN_PREFIX:-$PWD/data}"
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
bash scripts/dagster_home.sh "$DAGSTER_HOME"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE="${WANDB_MODE:-disabled}" JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
status=0
.venv/bin/python -m marin_assets.experiments.quickstart "$@" || status=$?
# The embedded Ray head outlives the run so that parallel runs share it; a laptop user does not
# want ~1 GB left behind, so stop it (set MARIN_KEEP_RAY=1 to keep it for the next run).
if [ "${MARIN_KEEP_RAY:-0}" != "1" ]; then
  .venv/bin/python -c "from marin_resources.ray_cluster import stop_embedded_head; stop_embedded_head()" || true
fi
[ "$status" -eq 0 ] || exit "$status"
echo
echo "outputs:          $MARIN_PREFIX"
echo "dagster instance: $DAGSTER_HOME"
echo "open the UI:      DAGSTER_HOME=$DAGSTER_HOME .venv/bin/dagster dev -w workspace.yaml  (http://127.0.0.1:3000)"
