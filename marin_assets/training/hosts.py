"""One writer per run on a multi-host slice.

On a TPU slice the step function runs on every host (``TpuConfig.launch``), and each host's
trainer writes its own log. Process 0 -- host 0 of slice 0 -- writes the run's ``train.log``,
``metrics.jsonl``, ``train_summary.json``, ``loss_curve.png`` and ``train_config.yaml``; every other
host writes its own beside them under ``hosts/<index>/`` and never touches the run's files, so the
published output is the same whichever host finishes last. Checkpoints and HF exports are
Levanter's (each host writes its shards, process 0 the metadata).

The index comes from the environment, before JAX starts: ``$MARIN_HOST_INDEX`` when set (a launcher
or a test names it), else the TPU runtime's ``TPU_WORKER_ID`` (with ``MEGASCALE_SLICE_ID`` on
multislice: ``<slice>-<worker>``), else ``0`` (one host).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from marin_assets.execution.storage import join_path

HOST_INDEX_ENV = "MARIN_HOST_INDEX"
PRIMARY = "0"
HOSTS_FOLDER = "hosts"


def host_index(env: Mapping[str, str] | None = None) -> str:
    """This host's index in the run (``"0"``: the one that writes the run's files)."""
    env = os.environ if env is None else env
    explicit = env.get(HOST_INDEX_ENV, "").strip()
    if explicit:
        return explicit
    worker = env.get("TPU_WORKER_ID", "").strip() or PRIMARY
    slice_id = env.get("MEGASCALE_SLICE_ID", "").strip() or PRIMARY
    return worker if slice_id == PRIMARY else f"{slice_id}-{worker}"


def is_primary(index: str | None = None) -> bool:
    """Whether this host writes the run's own files."""
    return (host_index() if index is None else index) == PRIMARY


def host_folder(out: str, index: str | None = None) -> str:
    """Where this host's log, metrics and summary go: ``out`` for host 0, ``out/hosts/<index>`` otherwise."""
    index = host_index() if index is None else index
    return out if index == PRIMARY else join_path(join_path(out, HOSTS_FOLDER), index)
