"""Reading a Levanter run back: json_logger metric records, step folders, the loss curve."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from typing import Any

from marin_assets.execution.storage import filesystem, join_path

JSON_LOGGER_MARK = '"tracker": "json_logger"'


def parse_metrics(log_text: str) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """Per-step metrics and summary metrics from Levanter json_logger lines (later lines win)."""
    steps: dict[int, dict[str, Any]] = {}
    summary: dict[str, Any] = {}
    for line in log_text.splitlines():
        i = line.find("{")
        if i < 0 or JSON_LOGGER_MARK not in line:
            continue
        try:
            record = json.loads(line[i:])
        except json.JSONDecodeError:
            continue
        if record.get("event") == "log":
            # step None: logged "now" (Levanter's lm-eval harness does so) -- the latest step seen.
            step = int(record["step"]) if record.get("step") is not None else max(steps, default=0)
            steps.setdefault(step, {}).update(_flatten(record.get("metrics", {})))
        elif record.get("event") == "summary":
            summary.update(_flatten(record.get("metrics", {})))
    return steps, summary


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def list_step_dirs(path: str) -> list[tuple[int, str]]:
    """``(N, path)`` for every ``step-N`` directory below ``path``, sorted by N."""
    fs, p = filesystem(path)
    found = []
    with contextlib.suppress(FileNotFoundError):
        for entry in fs.ls(p, detail=False):
            base = entry.rstrip("/").rsplit("/", 1)[-1]
            if base.startswith("step-") and base[5:].isdigit():
                found.append((int(base[5:]), join_path(path, base)))
    return sorted(found)


def loss_curve_png(steps: Mapping[int, Mapping[str, Any]]) -> bytes | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    train = sorted((s, m["train/loss"]) for s, m in steps.items() if "train/loss" in m)
    evals = sorted((s, m["eval/loss"]) for s, m in steps.items() if "eval/loss" in m)
    if not train:
        return None
    fig, ax = plt.subplots(figsize=(5, 3), dpi=80)
    ax.plot([s for s, _ in train], [v for _, v in train], label="train/loss")
    if evals:
        ax.plot([s for s, _ in evals], [v for _, v in evals], "o-", label="eval/loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
