"""One writer per run on a multi-host slice (issue 35 item 4).

A simulation, not ``jax.distributed``: Levanter 1.2.dev1644 takes one ``DistributedConfig`` for the
whole run (every host gets the same config, so the process id cannot come from it), and JAX detects
multi-process CPU clusters only from SLURM/MPI environments. So two real OS processes play hosts 0
and 1 (``MARIN_HOST_INDEX``, as ``TPU_WORKER_ID`` would on a slice), each writing its log and
summary the way ``run_levanter_train_lm`` does after its trainer ends -- ``AttemptLog`` in
``host_folder`` and ``summarize_training(write_to=host_folder)`` -- in both finishing orders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

HOST = """
import json, os, sys
from marin_assets.training.hosts import host_folder, host_index
from marin_assets.training.training import summarize_training
from marin_assets.training.training_log import AttemptLog

out, loss = sys.argv[1], float(sys.argv[2])
record = {"tracker": "json_logger", "event": "log", "step": 0, "metrics": {"train": {"loss": loss}}}
with AttemptLog(host_folder(out), "train.log") as log:
    with open(log.path, "a") as handle:
        handle.write("INFO " + json.dumps(record) + "\\n")
    text = log.text()
summarize_training(out, {"num_train_steps": 1, "train_batch_size": 1, "seq_len": 1}, text, 1.0,
                   write_to=host_folder(out))
print(host_index())
"""


def _host(out: Path, index: int, loss: float) -> None:
    env = {"MARIN_HOST_INDEX": str(index), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", HOST, str(out), str(loss)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(index)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["host1-last", "host0-last"])
def test_the_run_files_are_host_zeros_whichever_host_finishes_last(tmp_path, order):
    out = tmp_path / "run"
    losses = {0: 3.25, 1: 7.5}
    for index in order:
        _host(out, index, losses[index])
    assert json.loads((out / "train_summary.json").read_text())["final_loss"] == 3.25
    assert "3.25" in (out / "metrics.jsonl").read_text() and "7.5" not in (out / "train.log").read_text()
    assert json.loads((out / "hosts" / "1" / "train_summary.json").read_text())["final_loss"] == 7.5
    assert "7.5" in (out / "hosts" / "1" / "train.log").read_text()
    assert not (out / "hosts" / "0").exists()


def test_host_index_from_the_environment():
    from marin_assets.training.hosts import host_folder, host_index

    assert host_index({}) == "0"
    assert host_index({"TPU_WORKER_ID": "3"}) == "3"
    assert host_index({"TPU_WORKER_ID": "3", "MEGASCALE_SLICE_ID": "2"}) == "2-3"
    assert host_index({"TPU_WORKER_ID": "0", "MEGASCALE_SLICE_ID": "0"}) == "0"
    assert host_index({"MARIN_HOST_INDEX": "5", "TPU_WORKER_ID": "3"}) == "5"
    assert host_folder("gs://b/run", "0") == "gs://b/run"
    assert host_folder("gs://b/run", "2-3") == "gs://b/run/hosts/2-3"
    assert Path(host_folder("/x/run", "1")) == Path("/x/run/hosts/1")
