"""Reload benchmark: edit a script of a 1,000-step location on the production topology, reload, time it.

Starts ``scripts/local_deploy.sh`` (Postgres, GCS emulator, Ray, ``dagster code-server start``,
webserver, daemon) on a generated team repository -- ``--scripts`` scripts of ``--steps`` steps in
all, each step depending on up to two earlier steps of its script -- and waits until the webserver
lists every step. Then, ``--repeats`` times: edit the ``versioned`` value the first script's steps
carry, and time

* **reload**: GraphQL ``reloadRepositoryLocation`` (what *Reload definitions* and
  ``local_deploy.sh reload`` send) until it returns;
* **visible**: from the edit until ``assetNodes`` serves the edited step's new code version (the
  figure a researcher waits for);
* **query**: one ``assetNodes`` query of the reloaded location.

Prints each figure and their medians with the load average beside them; stops the topology.

    python -m bench.reload [--steps 1000] [--scripts 10] [--repeats 3] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = '''
"""Benchmark script {index}: {count} trivial steps (seed {index})."""
import random

from bench.engine import TrivialConfig, trivial
from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned

EDIT = {edit}  # what the benchmark edits

_rng = random.Random({index})
STEPS = []
for _i in range({count}):
    _parents = _rng.sample(STEPS, k=min(len(STEPS), _rng.randint(0, 2)))
    STEPS.append(
        ExecutorStep(
            "bench{index:03d}/s{{:05d}}".format(_i),
            trivial,
            TrivialConfig(this_output_path(), versioned(_i + EDIT), [output_path_of(p) for p in _parents]),
        )
    )
'''

ASSET_NODES = "{ assetNodes { assetKey { path } opVersion } }"
RELOAD = """
mutation { reloadRepositoryLocation(repositoryLocationName: "marin") {
  __typename ... on WorkspaceLocationEntry { loadStatus } ... on PythonError { message } } }
"""


def write_script(root: str, index: int, count: int, edit: int) -> None:
    """Write ``experiments/bench_<index>.py`` (atomically: the code server may be reading)."""
    path = os.path.join(root, "experiments", f"bench_{index:03d}.py")
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(SCRIPT.format(index=index, count=count, edit=edit))
    os.replace(tmp, path)


def write_project(root: str, steps: int, scripts: int) -> None:
    """The team repository: a pyproject listing ``experiments/*.py`` and the scripts."""
    os.makedirs(os.path.join(root, "experiments"))
    with open(os.path.join(root, "pyproject.toml"), "w") as handle:
        handle.write(
            '[project]\nname = "bench-reload"\nversion = "0"\n\n[tool.marin]\nexperiments = ["experiments/*.py"]\n'
        )
    per_script = [steps // scripts + (1 if i < steps % scripts else 0) for i in range(scripts)]
    for index, count in enumerate(per_script):
        write_script(root, index, count, 0)


def graphql(url: str, query: str, timeout: float = 300) -> dict[str, Any]:
    """POST ``query``; returns ``data`` (raises on GraphQL errors)."""
    request = urllib.request.Request(
        f"{url}/graphql", data=json.dumps({"query": query}).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        payload = json.loads(response.read())
    if payload.get("errors"):
        raise RuntimeError(payload["errors"])
    return payload["data"]


def versions(url: str) -> dict[str, str]:
    """Asset key -> code version, as the webserver serves them."""
    return {"/".join(n["assetKey"]["path"]): n["opVersion"] for n in graphql(url, ASSET_NODES)["assetNodes"]}


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; prints figures, returns 0 (1 when the location never served the steps)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--scripts", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)

    base = tempfile.mkdtemp(prefix="marin-bench-reload-", dir="/tmp")
    os.chmod(base, 0o711)  # Postgres runs as the `postgres` user under root
    project, state_dir = os.path.join(base, "team"), os.path.join(base, "state")
    write_project(project, args.steps, args.scripts)
    count0 = args.steps // args.scripts + (1 if args.steps % args.scripts else 0)
    local = [sys.executable, "-m", "marin_resources.deploy.local"]
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    try:
        started = time.monotonic()
        up = local + ["up", "--state_dir", state_dir, "--project_root", project, "--worker_cpus", "2"]
        up += ["--webserver_port", "0", "--browser_port", "0", "--ray_dashboard_port", "0"]
        proc = subprocess.run(up, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
            return 1
        with open(os.path.join(state_dir, "deploy.json")) as handle:
            url = f"http://127.0.0.1:{json.load(handle)['ports']['webserver']}"
        deadline = time.monotonic() + args.timeout
        while len(served := versions(url)) < args.steps:
            if time.monotonic() > deadline:
                print(f"the location served {len(served)} of {args.steps} steps", file=sys.stderr)
                return 1
            time.sleep(2)
        print(f"topology up with {len(served)} assets in {time.monotonic() - started:.1f}s (load {_load()})")
        watched = "bench000/s00000"
        figures: dict[str, list[float]] = {"reload": [], "visible": [], "query": []}
        for repeat in range(1, args.repeats + 1):
            before = versions(url)[watched]
            write_script(project, 0, count0, repeat)
            edited = time.monotonic()
            result = graphql(url, RELOAD)["reloadRepositoryLocation"]
            reloaded = time.monotonic() - edited
            if result["__typename"] != "WorkspaceLocationEntry":
                raise RuntimeError(f"reload failed: {result}")
            while True:
                asked = time.monotonic()
                now = versions(url)
                query = time.monotonic() - asked
                if now[watched] != before:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError("the new code version was never served")
                time.sleep(0.2)
            visible = time.monotonic() - edited
            figures["reload"].append(reloaded)
            figures["visible"].append(visible)
            figures["query"].append(query)
            print(
                f"edit {repeat}: reload returned after {reloaded:.2f}s, new code version served after "
                f"{visible:.2f}s, assetNodes query {query:.2f}s ({len(now)} assets; load {_load()})"
            )
        print(
            f"{args.steps} steps in {args.scripts} scripts, median of {args.repeats}: reload "
            f"{statistics.median(figures['reload']):.2f}s, edit -> new code version visible "
            f"{statistics.median(figures['visible']):.2f}s, assetNodes {statistics.median(figures['query']):.2f}s "
            f"(load {_load()}, {os.cpu_count()} cores)"
        )
        return 0
    finally:
        subprocess.run(local + ["down", "--state_dir", state_dir], cwd=REPO_ROOT, env=env, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
