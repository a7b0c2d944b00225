"""The entrypoint ``ray_run`` gives a Ray job: secret environment in, secret-free logs out.

``python -m marin_assets.run.job_entry -- <command...>`` runs on the cluster. The ``-e KEY VALUE``
variables of ``ray_run`` do not travel in the job's ``runtime_env.env_vars`` (Ray keeps those in
the job's metadata, which ``ray job list`` and the dashboard show to anyone); they travel as a
file inside a throw-away ``py_modules`` package whose module name is in ``$MARIN_JOB_ENV_MODULE``.
This entrypoint loads them, runs the command with them, and copies the command's output to the
job log with every value (8+ characters: the engine's one scrubber, ``execution.secrets``) replaced by ``***`` (except those of :data:`CONFIG_VARIABLES` such as
``MARIN_PREFIX``) -- so a job that prints its own environment still leaves no secret in the logs.
A value is replaced whole (a multi-line PEM key or service-account JSON too: the output is scrubbed
as a stream, not line by line), in its escaped forms (``repr``, JSON) and, for a multi-line value,
line by line where a line is long enough to be secret itself. Exit status and SIGTERM
(``ray_run stop``) pass through; a command killed by signal N exits 128+N.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from marin_assets.execution.secrets import StreamScrubber, stream_secrets  # the engine's one scrubber

ENV_MODULE_VAR = "MARIN_JOB_ENV_MODULE"
ENV_FILE = "env.json"
# ``-e`` variables that configure a run rather than authenticate it: their values (a prefix, a W&B
# project, offline switches) stay readable in the job's log, so output paths can be read there.
# Every other ``-e`` value is treated as a secret.
CONFIG_VARIABLES = frozenset(
    {
        "MARIN_PREFIX",
        "MARIN_RUN_OBSERVERS",
        "MARIN_RAY_TMPDIR",
        "MARIN_BROWSER_URL",
        "MARIN_STEPS_ON_RAY",
        "MARIN_RAY_PIP_SKIP_INSTALLED",
        "WANDB_MODE",
        "WANDB_PROJECT",
        "WANDB_ENTITY",
        "WANDB_GROUP",
        "WANDB_RUN_GROUP",
        "WANDB_NAME",
        "WANDB_TAGS",
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_HOME",
        "JAX_PLATFORMS",
        "XLA_FLAGS",
        "LIBTPU_INIT_ARGS",
        "TOKENIZERS_PARALLELISM",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "DAGSTER_HOME",
        "STORAGE_EMULATOR_HOST",
    }
)


def secret_values(env: dict[str, str]) -> list[bytes]:
    """The byte strings to hide for the ``-e`` values (all but :data:`CONFIG_VARIABLES`): every form
    of each, by the engine's one scrubber rule (:func:`marin_assets.execution.secrets.secret_strings`)."""
    return stream_secrets(value for key, value in env.items() if key not in CONFIG_VARIABLES)


def load_job_env() -> dict[str, str]:
    """The variables shipped by ``ray_run -e`` (empty when none were)."""
    module_name = os.environ.get(ENV_MODULE_VAR)
    if not module_name:
        return {}
    module = importlib.import_module(module_name)
    data = json.loads((Path(module.__file__).parent / ENV_FILE).read_text())
    return {str(k): str(v) for k, v in data.items()}


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: 128+N for a child killed by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str] | None = None) -> int:
    """Run the command after ``--`` with the shipped environment; return its exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[args.index("--") + 1 :] if "--" in args else args
    if not command:
        print("usage: python -m marin_assets.run.job_entry -- <command...>", file=sys.stderr)
        return 2
    extra = load_job_env()
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    env.pop(ENV_MODULE_VAR, None)
    secrets = secret_values(extra)
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    assert child.stdout is not None
    out = sys.stdout.buffer
    scrubber = StreamScrubber(secrets)
    # read1: whatever the child has written so far (a progress line without a newline shows up too).
    for chunk in iter(lambda: child.stdout.read1(65536), b""):
        out.write(scrubber.feed(chunk))
        out.flush()
    out.write(scrubber.flush())
    out.flush()
    return exit_status(child.wait())


if __name__ == "__main__":
    sys.exit(main())
