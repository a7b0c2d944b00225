"""Two things Marin users ask for: invalidate a step (and everything built on it) and garbage-collect
outputs no experiment uses. No Dagster import; the command lines are ``invalidate`` and ``gc``.

Both work from what is on storage, so they need no experiment script: every run of
``executor_main`` (and every run launched from Dagster) writes an experiment record (``<prefix>/experiments/*.json``) listing each step's
name, output path and full version dict, and a step's version holds the versions of everything it
depends on. A step is a *descendant* of another when the other's version appears among its
(pseudo-)dependency versions, at any depth.

* **invalidate** marks a step and every recorded descendant for recomputation without deleting
  data: the status file is moved aside to ``.executor_invalidated`` (with when and why), so the
  next run recomputes the step into the same path -- files the step writes again are replaced,
  others are kept -- and a dry run lists it as "run". A step being computed under a live lease is
  refused.
* **gc** lists step outputs under the prefix (folders holding ``.executor_status`` or
  ``.executor_info``) that no recorded experiment references, and deletes them only on
  confirmation. Outputs under a live lease are never deleted; deleting an experiment record makes
  its outputs collectable. Steps run only through the library (``run_steps``) write no experiment
  record: the Dagster job keeps every step of the code location, and the command line keeps the
  steps named with ``--keep module:attribute``.
"""

from __future__ import annotations

import json
import logging
import os
import select
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.conditional import UnsupportedStorageError, backend_for
from marin_assets.execution.lease import lease_for_output
from marin_assets.execution.status import INFO_FILE, STATUS_FILE, read_status
from marin_assets.execution.storage import atomic_write_text, filesystem, join_path, local_prefix, read_json, read_text

logger = logging.getLogger("marin.executor")

RECORDS_DIR = "experiments"
INVALIDATED_FILE = ".executor_invalidated"


@dataclass(frozen=True)
class RecordedStep:
    """One step as an experiment record lists it."""

    name: str
    output_path: str
    version: dict[str, Any]
    record: str


def recorded_steps(prefix: str) -> list[RecordedStep]:
    """Every step of every experiment record under ``prefix`` (one entry per output path)."""
    fs, root = filesystem(join_path(prefix, RECORDS_DIR))
    if not fs.exists(root):
        return []
    steps: dict[str, RecordedStep] = {}
    for path in sorted(fs.glob(f"{root}/*.json")):
        if path.rsplit("/", 1)[-1].startswith((".", "_")):
            continue  # a hidden temporary of a killed writer, not a record
        url = path if "://" not in prefix else f"{prefix.split('://', 1)[0]}://{path}"
        try:
            data = read_json(url)
        except (FileNotFoundError, ValueError) as exc:  # removed meanwhile, or not JSON
            logger.warning("%s: unreadable experiment record, skipped (%s)", url, exc)
            continue
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            logger.warning("%s: not an experiment record, skipped", url)
            continue
        for step in data["steps"]:
            if isinstance(step, dict) and "output_path" in step and "name" in step:
                steps.setdefault(
                    step["output_path"], RecordedStep(step["name"], step["output_path"], step.get("version") or {}, url)
                )
    return list(steps.values())


def _dependency_versions(version: Any) -> list[dict[str, Any]]:
    """Every (pseudo-)dependency version inside ``version``, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(version, dict):
        for key in ("dependencies", "pseudo_dependencies"):
            for dep in version.get(key) or []:
                if isinstance(dep, dict):
                    found.append(dep)
                    found.extend(_dependency_versions(dep))
    return found


def _matches(step: RecordedStep, selector: str, prefix: str) -> bool:
    """``selector`` is a step name, ``name-hash``, or an output path (absolute or under the prefix)."""
    base = step.output_path.rstrip("/")
    return (
        selector in (step.name, base, base.rsplit("/", 1)[-1])
        or join_path(prefix, selector) == base
        or (base.endswith("/" + selector))
    )


@dataclass
class InvalidationPlan:
    """What ``invalidate`` would mark: the selected steps and their descendants."""

    selected: list[RecordedStep] = field(default_factory=list)
    descendants: list[RecordedStep] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (output path, why)

    @property
    def targets(self) -> list[RecordedStep]:
        return [*self.selected, *self.descendants]


def plan_invalidation(prefix: str, selector: str, known: Sequence[RecordedStep] = ()) -> InvalidationPlan:
    """The steps ``selector`` names and every recorded (or ``known``) step that depends on one of them.

    Raises ValueError when no step matches.
    """
    by_path = {s.output_path: s for s in known}
    by_path.update({s.output_path: s for s in recorded_steps(prefix)})
    steps = list(by_path.values())
    selected = [s for s in steps if _matches(s, selector, prefix)]
    if not selected:
        names = sorted({s.name for s in steps})
        raise ValueError(f"no recorded step matches {selector!r} under {prefix}; recorded steps: {names}")
    keys = [json.dumps(s.version, sort_keys=True) for s in selected]
    descendants = [
        s
        for s in steps
        if s not in selected and any(json.dumps(d, sort_keys=True) in keys for d in _dependency_versions(s.version))
    ]
    plan = InvalidationPlan(selected, descendants)
    for step in plan.targets:
        status = read_status(step.output_path)
        if status is not None and status.status == "RUNNING" and lease_for_output(step.output_path).is_held_by_other():
            plan.refused.append((step.output_path, "being computed under a live lease"))
    return plan


def apply_invalidation(plan: InvalidationPlan, reason: str = "invalidated by user") -> list[str]:
    """Move each target's status aside (data kept); returns the output paths marked."""
    if plan.refused:
        raise RuntimeError(f"refusing to invalidate while steps are being computed: {plan.refused}")
    marked: list[str] = []
    for step in plan.targets:
        for folder in _status_folders(step.output_path):
            status_file = join_path(folder, STATUS_FILE)
            previous = read_text(status_file)
            if previous is None:
                continue  # never ran (or already invalidated): the next run computes it anyway
            record = {"time": time.time(), "reason": reason, "previous_status": previous.strip(), "name": step.name}
            atomic_write_text(join_path(folder, INVALIDATED_FILE), json.dumps(record))
            fs, path = filesystem(status_file)
            fs.rm(path)
            marked.append(folder)
    return marked


def _status_folders(output_path: str) -> list[str]:
    """``output_path`` and its partition folders (``<output>/<partition>``) that hold a status."""
    fs, root = filesystem(output_path)
    if not fs.exists(root):
        return []
    folders = [output_path]
    for entry in fs.ls(root, detail=True):
        if entry.get("type") == "directory":
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if fs.exists(f"{root.rstrip('/')}/{name}/{STATUS_FILE}"):
                folders.append(join_path(output_path, name))
    return folders


def _step_outputs(prefix: str) -> list[str]:
    """Folders under ``prefix`` that are step outputs (hold a status or info file), outermost only."""
    fs, root = filesystem(prefix)
    protocol = f"{prefix.split('://', 1)[0]}://" if "://" in prefix else ""
    outputs: list[str] = []
    for path in sorted(fs.find(root)):
        base = path.rsplit("/", 1)[-1]
        if base not in (STATUS_FILE, INFO_FILE, INVALIDATED_FILE):
            continue
        folder = protocol + path.rsplit("/", 1)[0]
        if folder not in outputs and not any(folder.startswith(o.rstrip("/") + "/") for o in outputs):
            outputs.append(folder)
    # An output listed after a folder inside it (sorting puts "a-1/x" after "a-1/.executor_status"
    # only sometimes): keep the outermost.
    return [o for o in outputs if not any(o != p and o.startswith(p.rstrip("/") + "/") for p in outputs)]


@dataclass
class GcPlan:
    """Outputs no experiment record references."""

    unreferenced: list[str] = field(default_factory=list)
    kept_live: list[str] = field(default_factory=list)
    referenced: int = 0


def plan_gc(prefix: str, keep: Iterable[str] = ()) -> GcPlan:
    """Step outputs under ``prefix`` that no recorded experiment references (nor ``keep`` lists)."""
    referenced = {s.output_path.rstrip("/") for s in recorded_steps(prefix)} | {k.rstrip("/") for k in keep}
    plan = GcPlan(referenced=len(referenced))
    records_root = join_path(prefix, RECORDS_DIR)
    for output in _step_outputs(prefix):
        folder = output.rstrip("/")
        # A partition folder (<output>/<drop>) belongs to its step's referenced output.
        if folder.startswith(records_root) or any(folder == r or folder.startswith(r + "/") for r in referenced):
            continue
        if lease_for_output(output).is_held_by_other():
            plan.kept_live.append(output)
        else:
            plan.unreferenced.append(output)
    return plan


def steps_of(steps: Sequence[Any], prefix: str, partitions: Mapping[str, Any] | None = None) -> list[RecordedStep]:
    """``steps`` and everything they depend on, resolved under ``prefix``, as records would list them
    (for steps no experiment record lists yet)."""
    from marin_assets.execution.executor_main import resolve_partitions
    from marin_assets.execution.versioning import StepGraph

    graph = StepGraph(steps, prefix, resolve_partitions(partitions, prefix))
    return [RecordedStep(n.name, n.output_path, n.version, "<code>") for n in graph.topological()]


def step_outputs_of(steps: Sequence[Any], prefix: str, partitions: Mapping[str, Any] | None = None) -> list[str]:
    """Output paths of ``steps`` and everything they depend on, under ``prefix`` (for ``keep``)."""
    return [step.output_path for step in steps_of(steps, prefix, partitions)]


def load_steps(spec: str) -> list[Any]:
    """Steps named ``module:attribute`` (a list, a dict of steps, or one step)."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not attr:
        raise ValueError(f"expected module:attribute, got {spec!r}")
    value = getattr(importlib.import_module(module_name), attr)
    if isinstance(value, Mapping):
        return list(value.values())
    return list(value) if isinstance(value, (list, tuple)) else [value]


def apply_gc(plan: GcPlan) -> list[str]:
    """Delete the unreferenced outputs of ``plan`` (re-checking each lease); returns what was deleted."""
    deleted: list[str] = []
    for output in plan.unreferenced:
        if lease_for_output(output).is_held_by_other():
            logger.warning("%s: a runner took it meanwhile, kept", output)
            continue
        fs, path = filesystem(output)
        fs.rm(path, recursive=True)
        deleted.append(output)
    return deleted


def checked_prefix(prefix: str) -> str:
    """``prefix`` as the engine spells it; a store without conditional writes (leases cannot be
    read reliably there) exits with status 2 and one line, before anything touches it."""
    prefix = local_prefix(prefix)
    try:
        backend_for(prefix)
    except UnsupportedStorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    return prefix


# How long a non-terminal stdin (a pipe) may take to deliver its answer before it counts as "no":
# a pipe that stays open and silent (a CI runner's stdin) must not hang the command.
PIPED_ANSWER_WAIT_S = 2.0


def confirm(question: str, assume_yes: bool) -> bool:
    """Ask unless ``assume_yes``: on the terminal, or an answer piped in (``echo y | ...``); no
    answer (end of input, ``/dev/null``, a silent pipe) means no."""
    if assume_yes:
        return True
    print(f"{question} [y/N] ", end="", flush=True)
    try:
        if not os.isatty(0):
            ready, _, _ = select.select([sys.stdin], [], [], PIPED_ANSWER_WAIT_S)
            answer = sys.stdin.readline() if ready else ""
            print()  # a piped answer is not echoed
        else:
            answer = input()
    except (EOFError, OSError, ValueError):
        answer = ""
    return answer.strip().lower() in {"y", "yes"}
