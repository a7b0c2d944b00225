"""A tiny training step for the cross-host takeover test (importable from a subprocess).

``python -m tests.execution.takeover_steps <executor_main args...>``. The step trains for
``num_steps`` steps of ``step_s`` seconds, logging a json_logger metric record per step into its
``train.log`` (the product's :class:`AttemptLog`, kept with the attempt, with its production
settings: like Levanter, the step never asks for an upload) and writing a checkpoint
after each (``checkpoints/step-N/state.json`` and ``arrays/<host>.bin``, then, ``ckpt_write_s``
later, ``metadata.json`` last, as Levanter orders them); it resumes from the latest complete
checkpoint it finds in its output path and ends writing ``metrics.jsonl`` from its log. Like a checkpointer's
background uploads, a thread writes scratch files the whole time. It writes with plain fsspec
(never through the engine's fenced helpers), so a paused runner that resumes *does* write.

Environment: ``MARIN_HOST_ID`` (which "host" this is), ``TAKEOVER_EVENTS`` (a log outside every
output: one line per start, checkpoint and tagged write) and ``TAKEOVER_TAG`` (a file whose text,
once the test writes it, is put into every byte the step writes from then on).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass

from marin_assets.execution import ExecutorStep, executor_main, this_output_path, versioned
from marin_assets.execution.storage import filesystem
from marin_assets.training.training_log import AttemptLog, metrics_jsonl


@dataclass(frozen=True)
class TinyTrainConfig:
    output_path: str
    num_steps: int = versioned(40)
    step_s: float = 0.15
    ckpt_write_s: float = 0.3


def _event(*words: object) -> None:
    with open(os.environ["TAKEOVER_EVENTS"], "a") as handle:
        handle.write(" ".join(str(w) for w in words) + "\n")


def _tag() -> str:
    try:
        with open(os.environ["TAKEOVER_TAG"]) as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return ""


def _latest_complete(fs, root: str) -> int:
    names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False)] if fs.exists(root) else []
    steps = [int(n.split("-", 1)[1]) for n in names if n.startswith("step-")]
    return max((s for s in steps if fs.exists(f"{root}/step-{s}/metadata.json")), default=0)


def _put(fs, path: str, data: bytes) -> None:
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)  # a no-op on object stores
    fs.pipe_file(path, data)


def tiny_train(config: TinyTrainConfig) -> dict[str, object]:
    """Train (resume) to ``num_steps``; returns where it resumed from and which host finished."""
    host = os.environ.get("MARIN_HOST_ID", "?")
    fs, out = filesystem(config.output_path)
    ckpts = f"{out.rstrip('/')}/checkpoints"
    stop = threading.Event()

    def scratch_writer() -> None:  # a background uploader that outlives nothing it should
        # Write first, then look at ``stop``: woken from SIGSTOP, it writes (tagged) before it can see
        # that its step ended -- the zombie write the test must find fenced out, on every run rather
        # than only when it wins the race against the step's own exit.
        n = 0
        while True:
            n += 1
            tag = _tag()
            _put(fs, f"{out}/scratch/{host}-{n % 5}.txt", f"{host} {n} {tag}".encode())
            if tag:
                _event("tagged", host, n)
            if stop.is_set():
                return
            time.sleep(0.02)

    # The log first, as the product's training does: it may drop copied checkpoints it does not cover.
    with AttemptLog(config.output_path, "train.log") as log:
        start = _latest_complete(fs, ckpts)
        _event("start", host, start)
        writer = threading.Thread(target=scratch_writer, daemon=True)
        writer.start()
        for step in range(start + 1, config.num_steps + 1):
            time.sleep(config.step_s)
            tag = _tag()
            with open(log.path, "a") as handle:  # a json_logger metric record, as Levanter logs one
                record = {"tracker": "json_logger", "event": "log", "step": step, "metrics": {"host": host}}
                handle.write(json.dumps(record) + "\n")
            _put(fs, f"{ckpts}/step-{step}/state.json", json.dumps({"step": step, "host": host, "tag": tag}).encode())
            _put(fs, f"{ckpts}/step-{step}/arrays/{host}.bin", f"{host} {step} {tag}".encode())
            _event("writing", host, step)
            time.sleep(config.ckpt_write_s)  # arrays still being committed: no marker yet
            _put(fs, f"{ckpts}/step-{step}/metadata.json", json.dumps({"step": step}).encode())
            _event("ckpt", host, step, tag or "-")
        stop.set()
        writer.join()
        _put(fs, f"{out}/model.json", json.dumps({"final_step": config.num_steps, "host": host}).encode())
        _put(fs, f"{out}/metrics.jsonl", metrics_jsonl(log.text()).encode())
    return {"resumed_from_step": start, "host": host}


def steps() -> list[ExecutorStep]:
    return [ExecutorStep("takeover/train", tiny_train, TinyTrainConfig(this_output_path()))]


if __name__ == "__main__":
    executor_main(steps(), argv=sys.argv[1:])
