"""The README's main job, timed: wall time by unit and by overhead, CPU seconds by process, memory.

Runs the README's command (``bash scripts/quickstart.sh``: curation of 3 sample drops -> tokenizer ->
per-drop Levanter caches -> tiny Llama -> Levanter bpb + lm-eval, recorded in Dagster) on a fresh
prefix and a fresh ``DAGSTER_HOME`` with its own embedded Ray, then again (fully cached). Goals
(2 cores, excluding install): <= 3 minutes, <= 4 GB.

    .venv/bin/python -m bench.quickstart [--size tiny] [--baseline GIT_REF] [-- quickstart args]

``--baseline REF`` first runs the same command from a ``git archive`` of REF (same virtualenv, same
machine, right before), and prints after/before ratios: on a shared machine only runs taken side by
side compare. Wall time moves with the machine's load (printed); the CPU seconds per process kind
and the per-unit lines move much less.

Memory is reported two ways: summed RSS (counts shared pages once per process, so it overstates)
and summed PSS (shared pages split between the processes that map them: the honest total).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 2**30
_UNIT_LINE = re.compile(r"^\[\s*\d+s\] (?:done  |FAILED) (?P<unit>\S+) \((?P<seconds>[\d.]+)s\)")


def process_kind(cmdline: str) -> str:
    """What a process of the run is, for the CPU breakdown."""
    if "levanter.main.train_lm" in cmdline or "levanter_main train" in cmdline:
        return "Levanter training"
    if "levanter.main.eval_lm" in cmdline or "levanter_main eval" in cmdline:
        return "Levanter eval"
    if " lm_eval " in f" {cmdline} " or "eval_data.lm_eval_main" in cmdline:
        return "lm-eval"
    if "marin_assets.experiments.quickstart" in cmdline:
        return "engine + Dagster recording"
    if "ray::" in cmdline or "default_worker.py" in cmdline:
        return "Ray workers (curation, caches)"
    if "ray" in cmdline:
        return "Ray head daemons"
    return "other (scripts, tokenizer pool)"


class Sampler:
    """Peak summed RSS/PSS and last-seen CPU seconds of a process tree plus one Ray temp dir's processes."""

    def __init__(self, root_pid: int, ray_tmp: str) -> None:
        self.root_pid, self.ray_tmp = root_pid, ray_tmp
        self.peak_rss = self.peak_pss = 0
        self.cpu: dict[int, tuple[str, float]] = {}
        self.ray_up_at: float | None = None
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _processes(self) -> dict[int, psutil.Process]:
        procs: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.root_pid)
            procs[root.pid] = root
            procs.update({c.pid: c for c in root.children(recursive=True)})
        for proc in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(self.ray_tmp in part for part in (proc.info["cmdline"] or [])):
                    procs[proc.pid] = proc
                    procs.update({c.pid: c for c in proc.children(recursive=True)})
        return procs

    def _run(self) -> None:
        address_file = os.path.join(self.ray_tmp, "marin_ray_address")
        while not self._stop.is_set():
            if self.ray_up_at is None and os.path.exists(address_file):
                self.ray_up_at = time.monotonic() - self._start
            rss = pss = 0
            for proc in self._processes().values():
                with contextlib.suppress(psutil.Error):
                    info = proc.memory_full_info()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
                    times = proc.cpu_times()
                    self.cpu[proc.pid] = (process_kind(" ".join(proc.cmdline())), times.user + times.system)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            time.sleep(0.25)

    def cpu_by_kind(self) -> dict[str, float]:
        kinds: dict[str, float] = {}
        for kind, seconds in self.cpu.values():
            kinds[kind] = kinds.get(kind, 0.0) + seconds
        return dict(sorted(kinds.items(), key=lambda item: -item[1]))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Run:
    """One run of the README command: wall time, timestamped output lines, what the sampler saw."""

    wall: float
    lines: list[tuple[float, str]]
    sampler: Sampler
    load: tuple[float, float]
    report: dict = field(default_factory=dict)

    def first(self, predicate) -> float | None:
        return next((t for t, line in self.lines if predicate(line)), None)

    def units(self) -> list[tuple[float, str, float]]:
        """``(finished at, unit, seconds)`` per progress line."""
        found = []
        for t, line in self.lines:
            match = _UNIT_LINE.match(line)
            if match:
                found.append((t, match.group("unit"), float(match.group("seconds"))))
        return found


def run_readme_command(repo: str, prefix: str, home: str, ray_tmp: str, size: str, extra: list[str]) -> Run:
    """``bash scripts/quickstart.sh --size SIZE`` in ``repo`` with a fresh prefix and Dagster home."""
    env = {
        **os.environ,
        "MARIN_PREFIX": prefix,
        "DAGSTER_HOME": home,
        "MARIN_RAY_TMPDIR": ray_tmp,
        "PYTHONPATH": repo,
    }
    cmd = ["bash", os.path.join(repo, "scripts", "quickstart.sh"), "--size", size, *extra]
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []
    with Sampler(proc.pid, ray_tmp) as sampler:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
        proc.wait()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        # The console is quiet by design: the run's own log (and when the process ended) tells why.
        logs = sorted(glob.glob(os.path.join(prefix, "experiments", "logs", "*.log")), key=os.path.getmtime)
        tail = ["(no run log)"]
        if logs:
            with open(logs[-1]) as handle:
                tail = handle.read().splitlines()[-40:]
        raise SystemExit(
            f"quickstart failed ({proc.returncode}) after {wall:.0f} s:\n"
            + "\n".join(f"[{t:6.0f}s] {line}" for t, line in lines[-60:])
            + f"\n--- the run log ({logs[-1] if logs else 'none'}), last lines:\n"
            + "\n".join(tail)
        )
    run = Run(wall, lines, sampler, (load_before, os.getloadavg()[0]))
    for _, line in reversed(lines):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict) and "run_id" in value:
                run.report = value
                break
    return run


def read_json(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


def _log_time(line: str) -> float | None:
    """Seconds since the epoch of a Levanter log line (``2026-11-22T14:07:24 - ...``)."""
    with contextlib.suppress(ValueError):
        return time.mktime(time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S"))
    return None


def training_phases(train_dir: str) -> dict[str, float]:
    """Seconds of the training subprocess's phases, read from its log (1 s resolution)."""
    marks: dict[str, float] = {}
    with open(os.path.join(train_dir, "train.log"), encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.startswith("===== marin: train_lm start "):
                marks["start"] = time.mktime(time.strptime(line.split("start ")[1][:19], "%Y-%m-%dT%H:%M:%S"))
                continue
            t = _log_time(line)
            if t is None:
                continue
            marks.setdefault("configured", t)  # first log line: imports and config parsing done
            if '"parameter_count"' in line:
                marks.setdefault("model_ready", t)
            if '"train/loss"' in line:
                marks.setdefault("first_step", t)
                marks["last_step"] = t
            marks["end"] = t
    order = ["start", "configured", "model_ready", "first_step", "last_step", "end"]
    names = {
        "configured": "Python/JAX/Levanter imports, config",
        "model_ready": "data and model set-up",
        "first_step": "first step (JIT compile)",
        "last_step": "remaining steps (+ evals, checkpoint)",
        "end": "final eval, HF export",
    }
    present = [k for k in order if k in marks]
    return {names[b]: marks[b] - marks[a] for a, b in zip(present, present[1:], strict=False)}


def breakdown(run: Run, prefix: str, size: str) -> list[tuple[str, float]]:
    """Wall seconds by part, in run order (parts overlap where units run two at a time)."""
    units = run.units()
    parts: list[tuple[str, float]] = []
    first_unit_start = min((t - s for t, _, s in units), default=0.0)
    parts.append(("install check, imports, sample drops, planning", first_unit_start))
    if run.sampler.ray_up_at is not None:
        parts.append(("  (Ray head up at)", run.sampler.ray_up_at))
    groups: dict[str, float] = {}
    for _, unit, seconds in units:
        group = unit.split("/", 1)[0] if not unit.startswith(("checkpoints", "evaluation")) else unit
        groups[group] = groups.get(group, 0.0) + seconds
    for group, seconds in groups.items():
        parts.append((f"unit {group}", seconds))
        if group.startswith("checkpoints"):
            train_dir = glob.glob(f"{prefix}/checkpoints/quickstart-{size}-*")[0]
            parts += [(f"  {name}", s) for name, s in training_phases(train_dir).items()]
        if group.startswith("evaluation"):
            meta = read_json(glob.glob(f"{prefix}/evaluation/quickstart-{size}-*/.executor_metadata.json")[0])
            parts.append(("  lm-eval subprocess", float(meta.get("lm_eval_s", 0.0))))
            if "levanter_eval_s" in meta:
                parts.append(("  Levanter eval subprocess (side by side)", float(meta["levanter_eval_s"])))
    last_unit = max((t for t, _, _ in units), default=0.0)
    json_at = run.first(lambda line: line.startswith('{"run_id"'))
    if json_at is not None:
        parts.append(("Dagster recording (one run per drop + one)", json_at - last_unit))
        parts.append(("Ray stop, summary, exit", run.wall - json_at))
    return parts


def report_run(name: str, run: Run, prefix: str, size: str) -> None:
    print(f"{name}: {run.wall:6.1f} s wall, load average {run.load[0]:.1f} -> {run.load[1]:.1f}")
    print(f"  peak memory: PSS {run.sampler.peak_pss / GIB:.2f} GiB, summed RSS {run.sampler.peak_rss / GIB:.2f} GiB")
    print("  wall seconds by part:")
    for part, seconds in breakdown(run, prefix, size):
        print(f"    {part:<52} {seconds:7.1f}")
    print("  wall seconds by unit:")
    for _, unit, seconds in run.units():
        print(f"    {unit:<52} {seconds:7.1f}")
    cpu = run.sampler.cpu_by_kind()
    print(f"  CPU seconds (user+sys) by process kind, total {sum(cpu.values()):.0f}:")
    for kind, seconds in cpu.items():
        print(f"    {kind:<52} {seconds:7.1f}")


def export_tree(ref: str, dest: str) -> str:
    """The files of git ``ref`` in ``dest`` (read-only for the repository: ``git archive``)."""
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    os.symlink(os.path.join(REPO, ".venv"), os.path.join(dest, ".venv"))
    # The shared virtualenv is used as installed: the ref's own setup step would see other pins and
    # re-point the editable install at this temporary copy for every process of the machine.
    with open(os.path.join(dest, "scripts", "setup_env.sh"), "w") as handle:
        handle.write("#!/usr/bin/env bash\n# bench/quickstart.py: baseline copy, nothing to install\n")
    return dest


def measure(repo: str, tmp: str, size: str, extra: list[str]) -> tuple[Run, Run, str]:
    """First run on a fresh prefix/home, then the fully cached re-run."""
    ray_tmp = tempfile.mkdtemp(prefix="mrb-", dir="/tmp")
    prefix, home = os.path.join(tmp, "data"), os.path.join(tmp, "dagster_home")
    from marin_resources.ray_head import stop_embedded_head

    try:
        first = run_readme_command(repo, prefix, home, ray_tmp, size, extra)
        second = run_readme_command(repo, prefix, home, ray_tmp, size, extra)
    finally:
        stop_embedded_head(ray_tmp)
    return first, second, prefix


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--baseline", default=None, metavar="GIT_REF", help="run this ref's quickstart first")
    args, extra = parser.parse_known_args()  # the rest goes to the quickstart (e.g. --max_concurrent 1)
    extra = [a for a in extra if a != "--"]
    print(f"quickstart ({args.size}) on {os.cpu_count()} cores, README command, fresh prefix and DAGSTER_HOME")
    # Install outside the timed runs ("excluding install"); the runs' own check is then a no-op.
    subprocess.run(["bash", os.path.join(REPO, "scripts", "setup_env.sh")], check=True, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        before = None
        if args.baseline:
            base_repo = export_tree(args.baseline, os.path.join(tmp, "baseline-src"))
            before, before_cached, before_prefix = measure(base_repo, os.path.join(tmp, "baseline"), args.size, extra)
            report_run(f"before ({args.baseline})", before, before_prefix, args.size)
            print(f"  cached re-run: {before_cached.wall:6.1f} s")
        after, cached, prefix = measure(REPO, os.path.join(tmp, "current"), args.size, extra)
        report_run("after (this checkout)" if before else "first run", after, prefix, args.size)
        print(
            f"  cached re-run: {cached.wall:6.1f} s, {cached.report.get('ran')} computed, "
            f"{cached.report.get('cached')} cached"
        )
        train = read_json(glob.glob(f"{prefix}/checkpoints/quickstart-{args.size}-*/.executor_metadata.json")[0])
        print(
            f"  train loss {train['initial_loss']:.2f} -> {train['final_loss']:.2f}; eval loss "
            f"{train.get('initial_eval_loss', float('nan')):.2f} -> {train['eval_loss']:.2f}; "
            f"{train['tokens_per_s']:.0f} tokens/s, {train['parameter_count']} parameters"
        )
        if before is not None:
            b_cpu, a_cpu = sum(before.sampler.cpu_by_kind().values()), sum(after.sampler.cpu_by_kind().values())
            print(f"after / before: wall {after.wall / before.wall:.2f}x, CPU seconds {a_cpu / b_cpu:.2f}x")
    print("goal: <= 180 s wall on 2 cores (excluding install), <= 4 GB")


if __name__ == "__main__":
    sys.exit(main())
