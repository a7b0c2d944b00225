"""Code-location load benchmark: our discovered experiments vs plain Dagster with the same graph.

For each size (steps), spread (scripts) and share of watched steps (``--watched_every K``: every
K-th step is watched, an op of its own in ours; 0: none) it writes a project whose ``experiments/``
folder holds the scripts (a random DAG, each step depending on up to two earlier steps, possibly of
another script), then starts ``dagster-webserver -f <file>`` on each side, one after the other:

* **ours**: this repository's ``definitions.py`` discovering the scripts (``MARIN_PROJECT_ROOT``);
* **plain**: a file building one plain ``dg.AssetSpec`` per step with the same keys, deps, groups
  and code versions (external assets: no ops, nothing to run, the cheapest Dagster has);
* **materializable**, the goal's baseline: plain Dagster with the same specs in the same ops as
  ours -- a ``multi_asset`` per watched step, the other steps in one subsettable ``multi_asset``
  per level of watched steps above them (one op when none is watched). The bench counts both
  sides' ops through GraphQL and says whether they match;
* **op per step** (``--op_per_step``): plain Dagster with one ``multi_asset`` per step, the layout
  that would give each step its own bar in the run page.

Each is timed from process start until the webserver answers and GraphQL ``assetNodes`` lists
every step's asset. Prints seconds, the ratios ours/plain and ours/materializable (the goal:
<= 1.3) and the load average beside them, and the CPU seconds the webserver and its code server
spent until then (on a shared, loaded machine wall times swing by tens of percent; CPU seconds
much less).

``--phases`` also shows where the time goes, in a fresh process per side: building the definitions
(discovery, hashing, Dagster specs and ops), the repository, the snapshot the code server sends,
its serialization and the webserver's deserialization, with the snapshot's size (and, for
materializable, the job snapshot of its ``__ASSET_JOB``, which the phases also build).

    python -m bench.location_load [--steps 1000 10000] [--scripts 1 100] [--timeout 600] [--phases] [--op_per_step] [--watched_every 0 100]

Plain Dagster's ops carry no resources and no definition metadata: ours' (the storage and Ray
resources, ``marin/version``, ``marin/browser``, ``dagster/uri``, descriptions) count as ours' cost.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DAG_MODULE = '''
"""The benchmark DAG: {steps} steps over {scripts} scripts (seed 1), built once per process."""
import functools
import random

from bench.engine import TrivialConfig, trivial
from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned

STEPS, SCRIPTS, WATCHED_EVERY = {steps}, {scripts}, {watched_every}


def watched(i):
    return bool(WATCHED_EVERY) and i % WATCHED_EVERY == 0


@functools.cache
def dag():
    rng = random.Random(1)
    steps, parents_of = [], []
    for i in range(STEPS):
        parents = rng.sample(range(len(steps)), k=min(len(steps), rng.randint(0, 2))) if steps else []
        step = ExecutorStep(
            f"bench{{i % SCRIPTS:03d}}/s{{i:05d}}",
            trivial,
            TrivialConfig(this_output_path(), versioned(i), [output_path_of(steps[p]) for p in parents]),
            # Every WATCHED_EVERY-th step is watched: an op of its own in ours (step_ops).
            watched=True if watched(i) else None,
        )
        steps.append(step)
        parents_of.append(parents)
    return steps, parents_of


def steps_of(script):
    return [s for i, s in enumerate(dag()[0]) if i % SCRIPTS == script]
'''

SCRIPT = '''
"""Benchmark script {index}."""
from benchdag import steps_of

STEPS = steps_of({index})
'''

PLAIN = '''
"""Plain Dagster: one AssetSpec per step of the benchmark DAG (same keys, deps and groups)."""
import sys

sys.path.insert(0, {root!r})
import dagster as dg
from benchdag import SCRIPTS, dag


def key(step):
    return dg.AssetKey(step.name.split("/"))


steps, parents_of = dag()
defs = dg.Definitions(
    assets=[
        dg.AssetSpec(
            key(step),
            deps=[key(steps[p]) for p in parents],
            group_name=f"exp_{{i % SCRIPTS:03d}}",
            code_version=str(i),
        )
        for i, (step, parents) in enumerate(zip(steps, parents_of))
    ]
)
'''


MATERIALIZABLE = '''
"""Plain Dagster, materializable, with ours' op structure: the same specs (keys, deps, groups, code
versions) in the same ops -- a ``multi_asset`` per watched step, the other steps in one subsettable
``multi_asset`` per level of watched steps above them (ours: ``step_ops.assemble_step_ops``)."""
import sys

sys.path.insert(0, {root!r})
import dagster as dg
from benchdag import SCRIPTS, dag, watched


def key(step):
    return dg.AssetKey(step.name.split("/"))


steps, parents_of = dag()
specs = [
    dg.AssetSpec(
        key(step), deps=[key(steps[p]) for p in parents], group_name=f"exp_{{i % SCRIPTS:03d}}", code_version=str(i)
    )
    for i, (step, parents) in enumerate(zip(steps, parents_of))
]
# Watched steps on the longest path to each step: cheap steps of one level share an op, so no two
# ops wait on each other (the same rule as ours).
levels = []
for parents in parents_of:
    levels.append(max((levels[p] + watched(p) for p in parents), default=0))


def packed(level, level_specs):
    @dg.multi_asset(name=f"steps_l{{level}}" if level else "steps", specs=level_specs, can_subset=True)
    def _steps(context: dg.AssetExecutionContext):
        for selected in context.selected_asset_keys:
            yield dg.MaterializeResult(asset_key=selected)

    return _steps


def own(i, spec):
    @dg.multi_asset(name=f"s{{i:05d}}", specs=[spec])
    def _step():
        return dg.MaterializeResult(asset_key=spec.key)

    return _step


by_level = {{}}
for i, spec in enumerate(specs):
    if not watched(i):
        by_level.setdefault(levels[i], []).append(spec)
defs = dg.Definitions(
    assets=[packed(level, level_specs) for level, level_specs in sorted(by_level.items())]
    + [own(i, spec) for i, spec in enumerate(specs) if watched(i)]
)
'''


OP_PER_STEP = '''
"""Plain Dagster, one op per step: a ``multi_asset`` per step of the benchmark DAG (same keys, deps, groups)."""
import sys

sys.path.insert(0, {root!r})
import dagster as dg
from benchdag import SCRIPTS, dag


def key(step):
    return dg.AssetKey(step.name.split("/"))


def op_of(i, step, parents):
    spec = dg.AssetSpec(
        key(step), deps=[key(steps[p]) for p in parents], group_name=f"exp_{{i % SCRIPTS:03d}}", code_version=str(i)
    )

    @dg.multi_asset(name=f"s{{i:05d}}", specs=[spec])
    def _op():
        return None

    return _op


steps, parents_of = dag()
defs = dg.Definitions(assets=[op_of(i, s, p) for i, (s, p) in enumerate(zip(steps, parents_of))])
'''


def write_project(root: str, steps: int, scripts: int, watched_every: int = 0) -> None:
    """The benchmark project: pyproject, the DAG module, the scripts, the plain-Dagster file."""
    os.makedirs(os.path.join(root, "experiments"))
    with open(os.path.join(root, "pyproject.toml"), "w") as handle:
        handle.write('[tool.marin]\nexperiments = ["experiments/*.py"]\n')
    with open(os.path.join(root, "benchdag.py"), "w") as handle:
        handle.write(textwrap.dedent(DAG_MODULE.format(steps=steps, scripts=scripts, watched_every=watched_every)))
    for index in range(scripts):
        with open(os.path.join(root, "experiments", f"exp_{index:03d}.py"), "w") as handle:
            handle.write(SCRIPT.format(index=index))
    with open(os.path.join(root, "plain_defs.py"), "w") as handle:
        handle.write(PLAIN.format(root=root))
    with open(os.path.join(root, "materializable_defs.py"), "w") as handle:
        handle.write(MATERIALIZABLE.format(root=root))
    with open(os.path.join(root, "op_per_step_defs.py"), "w") as handle:
        handle.write(OP_PER_STEP.format(root=root))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _asset_nodes(url: str) -> tuple[int, int]:
    """(assets GraphQL ``assetNodes`` lists, distinct ops materializing them); -1 assets if not answering."""
    body = json.dumps({"query": "{ assetNodes { id opNames } }"}).encode()
    request = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            payload = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return -1, 0
    nodes = (payload.get("data") or {}).get("assetNodes") or []
    return len(nodes), len({op for node in nodes for op in node.get("opNames") or ()})


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its live descendants (the code server)."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def time_load(file: str, env: dict[str, str], expected: int, timeout: float) -> tuple[float, float, int]:
    """Seconds from starting ``dagster-webserver -f file`` until ``assetNodes`` lists ``expected``
    assets, the CPU seconds the webserver and its code server spent until then, and the number of
    ops materializing those assets (0 for external asset specs)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as home:
        with open(os.path.join(home, "dagster.yaml"), "w") as handle:
            handle.write("telemetry:\n  enabled: false\n")
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "dagster_webserver", "-f", file, "-h", "127.0.0.1", "-p", str(port)],
            cwd=REPO_ROOT,
            env={**env, "DAGSTER_HOME": home},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"webserver for {file} exited with {process.returncode}")
                if time.perf_counter() - start > timeout:
                    raise TimeoutError(f"{file}: not every asset listed after {timeout} s")
                count, ops = _asset_nodes(url)
                if count >= expected:
                    return time.perf_counter() - start, _cpu_seconds(process.pid), ops
                time.sleep(0.25)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


PHASES = """
import importlib.util, json, sys, time
start = time.perf_counter()
import dagster
from dagster_shared.serdes import deserialize_value, serialize_value
times = {"import dagster": time.perf_counter() - start}
t = time.perf_counter()
spec = importlib.util.spec_from_file_location("location", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
times["definitions"] = time.perf_counter() - t
t = time.perf_counter()
repo = module.defs.get_repository_def()  # ours builds it while loading: ~0 here
times["repository"] = time.perf_counter() - t
# Dagster's private snapshot classes, through the one internals module (already imported by the
# location's partition sets, so not timed here).
from marin_assets.dagster_bridge.dagster_internals import code_server_snapshots
t = time.perf_counter()
snaps = code_server_snapshots(repo)  # as the code server answers the webserver
times["snapshot"] = time.perf_counter() - t
t = time.perf_counter()
texts = [serialize_value(snap) for snap in snaps]
times["serialize"] = time.perf_counter() - t
t = time.perf_counter()
for text in texts:
    deserialize_value(text)
times["deserialize"] = time.perf_counter() - t
times["cpu"] = time.process_time()  # the whole process, import dagster included
times["MB"] = sum(len(text) for text in texts) / 1e6
print(json.dumps(times))
"""


def phase_times(file: str, env: dict[str, str]) -> dict[str, float]:
    """Seconds per load phase of ``file`` in a fresh process (and the snapshot's MB)."""
    out = subprocess.run(
        [sys.executable, "-c", PHASES, file], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--scripts", type=int, nargs="+", default=[1, 100])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--phases", action="store_true", help="also time each load phase in-process")
    parser.add_argument(
        "--watched_every",
        type=int,
        nargs="+",
        default=[0, 100],
        help="make every K-th step watched (an op of its own in ours); 0: none. Several: one run each",
    )
    parser.add_argument(
        "--op_per_step", action="store_true", help="also time plain Dagster with one op (multi_asset) per step"
    )
    args = parser.parse_args()
    print(
        f"location load: ours (discovered scripts) vs plain Dagster with the same graph, {os.cpu_count()} cores; "
        "goal: ours <= 1.3x plain materializable, the same assets in the same ops as ours",
        flush=True,
    )
    for steps, scripts, watched_every in (
        (n, k, w) for n in args.steps for k in args.scripts for w in args.watched_every
    ):
        label = f"{steps:>6} steps / {scripts:>3} script(s)"
        if watched_every:  # its own words, so a row of the unwatched graph reads as before
            label += f", every {watched_every}th watched"
        with tempfile.TemporaryDirectory() as root:
            write_project(root, steps, scripts, watched_every)
            pythonpath = os.pathsep.join([root, REPO_ROOT, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
            env = {**os.environ, "PYTHONPATH": pythonpath, "MARIN_PROJECT_ROOT": root}
            env.pop("MARIN_EXPERIMENTS", None)
            env["MARIN_PREFIX"] = os.path.join(root, "prefix")
            files = {
                "ours": os.path.join(REPO_ROOT, "definitions.py"),
                "plain": os.path.join(root, "plain_defs.py"),
                "materializable": os.path.join(root, "materializable_defs.py"),
            }
            load_before = os.getloadavg()[0]
            plain, plain_cpu, _ = time_load(files["plain"], env, steps, args.timeout)
            ours, ours_cpu, ours_ops = time_load(files["ours"], env, steps, args.timeout)
            load_after = os.getloadavg()[0]
            print(
                f"  {label}: ours {ours:7.1f} s  plain {plain:7.1f} s  ratio {ours / plain:4.2f}  "
                f"(plain: external AssetSpecs, no ops; load avg {load_before:.1f} -> {load_after:.1f})",
                flush=True,
            )
            materializable, materializable_cpu, ops = time_load(files["materializable"], env, steps, args.timeout)
            same = (
                f"same {ops} op(s) as ours"
                if ops == ours_ops
                else f"NOT ours' op structure: {ops} ops, ours {ours_ops}"
            )
            print(
                f"  {label}: plain materializable ({steps} assets, {same}) {materializable:7.1f} s, "
                f"ours / materializable {ours / materializable:4.2f} (goal <= 1.3; load avg {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            print(
                f"  {label}: CPU s (webserver + code server): ours "
                f"{ours_cpu:6.1f}  plain {plain_cpu:6.1f}  materializable {materializable_cpu:6.1f}  "
                f"ratios {ours_cpu / plain_cpu:4.2f} / {ours_cpu / materializable_cpu:4.2f}",
                flush=True,
            )
            if args.op_per_step:
                files["op per step"] = os.path.join(root, "op_per_step_defs.py")
                per_step, _, _ = time_load(files["op per step"], env, steps, args.timeout)
                print(
                    f"  {label}: plain Dagster with an op per step "
                    f"{per_step:7.1f} s, ratio to plain specs {per_step / plain:4.2f} "
                    f"(load avg {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
            if args.phases:
                print(f"    phases, {label.strip()}:", flush=True)
                for side, file in files.items():
                    times = phase_times(file, env)
                    cells = "  ".join(f"{k} {v:.2f}{'' if k == 'MB' else ' s'}" for k, v in times.items())
                    print(f"      {side:>5}: {cells}", flush=True)


if __name__ == "__main__":
    main()
