#!/usr/bin/env bash
# Set up the environment and run the main job (the quickstart pipeline) on embedded defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export MARIN_PREFIX="${MARIN_PREFIX:-$PWD/data}"
export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
bash scripts/dagster_home.sh "$DAGSTER_HOME"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE="${WANDB_MODE:-disabled}" JAX_PLATFORMS="${JAX_PLATFORMS:-cpu}"
# The embedded Ray head outlives a run so that parallel runs share it; a laptop user does not want
# ~1 GB left behind, so the quickstart stops it at its end (MARIN_KEEP_RAY=1 keeps it for the next
# run). The quickstart ends with its own summary: where the outputs and the UI are.
stop_ray=(--stop_ray)
[ "${MARIN_KEEP_RAY:-0}" = "1" ] && stop_ray=()
status=0
.venv/bin/marin quickstart "${stop_ray[@]}" "$@" || status=$?
if [ "$status" -ne 0 ] && [ "${MARIN_KEEP_RAY:-0}" != "1" ]; then
  # A run that died before its own clean-up.
  .venv/bin/marin ray stop || true
fi
exit "$status"
