"""The README's main job: wall time, peak memory, loss and eval numbers of the quickstart.

Runs ``python -m marin_assets.experiments.quickstart`` (curation of 3 sample drops -> tokenizer ->
per-drop Levanter caches -> tiny Llama -> Levanter bpb + lm-eval) on a fresh prefix with its own
embedded Ray, samples the memory of the whole process tree plus that Ray's processes, then runs it
again (fully cached). Goals (2 cores): <= 3 minutes (excluding install), <= 4 GB.

    .venv/bin/python -m bench.quickstart [--size tiny]

Memory is reported two ways: summed RSS (counts shared pages once per process, so it overstates)
and summed PSS (shared pages split between the processes that map them: the honest total).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PeakMemory:
    """Peak summed RSS and PSS of a process tree plus the processes of one Ray temp dir."""

    def __init__(self, root_pid: int, ray_tmp: str) -> None:
        self.root_pid, self.ray_tmp = root_pid, ray_tmp
        self.peak_rss = self.peak_pss = 0
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
        while not self._stop.is_set():
            rss = pss = 0
            for proc in self._processes().values():
                with contextlib.suppress(psutil.Error):
                    info = proc.memory_full_info()
                    rss += info.rss
                    pss += getattr(info, "pss", info.rss)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            time.sleep(0.5)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(prefix: str, ray_tmp: str, size: str, dagster_home: str, extra: list[str]) -> tuple[float, PeakMemory, dict]:
    env = {**os.environ, "MARIN_RAY_TMPDIR": ray_tmp, "DAGSTER_HOME": dagster_home, "PYTHONPATH": REPO}
    cmd = [sys.executable, "-m", "marin_assets.experiments.quickstart", "--size", size, "--prefix", prefix, *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with PeakMemory(proc.pid, ray_tmp) as memory:
        out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"quickstart failed ({proc.returncode}):\n{err[-4000:]}")
    return wall, memory, _last_json_line(out)


def _last_json_line(out: str) -> dict:
    """The quickstart's JSON summary: the last stdout line that parses as a JSON object."""
    for line in reversed(out.strip().splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    raise SystemExit(f"no JSON summary in the quickstart's output:\n{out[-2000:]}")


def read_json(path: str) -> dict:
    with open(path) as handle:
        return json.load(handle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="tiny")
    args, extra = parser.parse_known_args()  # the rest goes to the quickstart (e.g. --max_concurrent 1)
    from marin_resources.ray_cluster import stop_embedded_head

    with tempfile.TemporaryDirectory() as tmp:
        ray_tmp = tempfile.mkdtemp(prefix="mrb-", dir="/tmp")
        prefix, home = os.path.join(tmp, "data"), os.path.join(tmp, "dagster_home")
        subprocess.run(["bash", os.path.join(REPO, "scripts", "dagster_home.sh"), home], check=True)
        try:
            wall, memory, summary = run(prefix, ray_tmp, args.size, home, extra)
            wall2, _, summary2 = run(prefix, ray_tmp, args.size, home, extra)
        finally:
            stop_embedded_head(ray_tmp)
        train = read_json(glob.glob(f"{prefix}/checkpoints/quickstart-{args.size}-*/.executor_metadata.json")[0])
        evaluation = read_json(glob.glob(f"{prefix}/evaluation/quickstart-{args.size}-*/.executor_metadata.json")[0])
    gib = 2**30
    print(f"quickstart ({args.size}) on {os.cpu_count()} cores, embedded Ray, recorded in Dagster")
    print(f"  first run:  {wall:6.1f} s wall, {summary['ran']} units computed (goal <= 180 s)")
    print(
        f"  peak memory: PSS {memory.peak_pss / gib:.2f} GiB, summed RSS {memory.peak_rss / gib:.2f} GiB (goal <= 4 GB)"
    )
    print(f"  second run: {wall2:6.1f} s wall, {summary2['ran']} computed, {summary2['cached']} cached")
    print(
        f"  train loss {train['initial_loss']:.2f} -> {train['final_loss']:.2f}; eval loss {train.get('initial_eval_loss', float('nan')):.2f} -> {train['eval_loss']:.2f}"
    )
    print(f"  tokens/s {train['tokens_per_s']:.0f}, parameters {train['parameter_count']}")
    print("  eval:\n" + "\n".join("    " + line for line in evaluation["metrics"]["value"].splitlines()))


if __name__ == "__main__":
    main()
