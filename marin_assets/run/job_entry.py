"""The entrypoint ``ray_run`` gives a Ray job: secret environment in, secret-free logs out.

``python -m marin_assets.run.job_entry -- <command...>`` runs on the cluster. The ``-e KEY VALUE``
variables of ``ray_run`` do not travel in the job's ``runtime_env.env_vars`` (Ray keeps those in
the job's metadata, which ``ray job list`` and the dashboard show to anyone); they travel as a
file inside a throw-away ``py_modules`` package whose module name is in ``$MARIN_JOB_ENV_MODULE``.
This entrypoint loads them, runs the command with them, and copies the command's output to the
job log with every value replaced by ``***`` (except those of :data:`CONFIG_VARIABLES` such as
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
import re
import signal
import subprocess
import sys
from pathlib import Path

ENV_MODULE_VAR = "MARIN_JOB_ENV_MODULE"
ENV_FILE = "env.json"
REDACTED = b"***"
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


# A line of a multi-line secret (a PEM body line, a service-account JSON line) this long is secret
# on its own; shorter ones ("{", "}", "-----END") would blank out ordinary log text.
MIN_FRAGMENT = 20


def _escaped_forms(value: str) -> set[str]:
    """``value`` as Python's ``repr`` (either quote escaped or not) and JSON (ASCII or not, ``\\/``)
    write it inside a larger string."""
    both_quotes = repr(value + "'\"")[1:-4]  # repr of a string holding ' and " escapes '
    forms = {
        value,
        repr(value)[1:-1],
        both_quotes,
        both_quotes.replace("\\'", "'"),
        value.encode("unicode_escape").decode("ascii"),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }
    forms |= {form.replace("/", "\\/") for form in forms if "/" in form}
    return forms


def secret_forms(value: str) -> set[str]:
    """Every string that reveals ``value`` in a log: the value and its escaped forms, and for a
    multi-line value (real newlines or ``\\n`` escapes, as in a service-account JSON's key) each
    line of :data:`MIN_FRAGMENT`+ characters with its escaped forms."""
    forms = _escaped_forms(value)
    if "\n" in value or "\\n" in value:
        for line in re.split(r"\r?\n|\\n", value):
            line = line.strip()
            if len(line) >= MIN_FRAGMENT:
                forms |= _escaped_forms(line)
    return forms


def secret_values(env: dict[str, str]) -> list[bytes]:
    """The byte strings to hide for the ``-e`` values (all but :data:`CONFIG_VARIABLES`; 3+
    characters): each value's :func:`secret_forms`, longest first so a secret containing another
    is replaced whole. 1-2 character values would turn every log line into asterisks and are not
    secrets anyone should pass."""
    hidden: set[bytes] = set()
    for key, value in env.items():
        if key in CONFIG_VARIABLES or len(value) < 3:
            continue
        hidden |= {form.encode() for form in secret_forms(value) if len(form) >= 3}
    return sorted(hidden, key=len, reverse=True)


def load_job_env() -> dict[str, str]:
    """The variables shipped by ``ray_run -e`` (empty when none were)."""
    module_name = os.environ.get(ENV_MODULE_VAR)
    if not module_name:
        return {}
    module = importlib.import_module(module_name)
    data = json.loads((Path(module.__file__).parent / ENV_FILE).read_text())
    return {str(k): str(v) for k, v in data.items()}


def scrub(data: bytes, secrets: list[bytes]) -> bytes:
    """``data`` with every secret replaced by ``***`` (``secrets`` longest first)."""
    for secret in secrets:
        data = data.replace(secret, REDACTED)
    return data


class StreamScrubber:
    """Scrubs a stream that arrives in arbitrary chunks: a secret split across chunks (or lines) is
    still replaced whole. Only a chunk's tail that could be the start of a secret is held back until
    the next chunk (or :meth:`flush`); everything else is passed on at once."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets = sorted(set(secrets), key=len, reverse=True)
        self.longest = max((len(s) for s in self.secrets), default=0)
        self.firsts = {s[0] for s in self.secrets}
        self.pending = b""

    def _cut(self, data: bytes) -> int:
        """Where the part safe to scrub and emit now ends.

        The tail from the first position whose rest is a proper prefix of a secret is held (the
        secret may complete in the next chunk -- and a shorter secret, e.g. a PEM's first line,
        must not be replaced inside it first); so is a whole secret that would straddle the cut.
        """
        cut = len(data)
        for i in range(max(0, len(data) - self.longest + 1), len(data)):
            if data[i] in self.firsts:
                tail = data[i:]
                if any(len(s) > len(tail) and s.startswith(tail) for s in self.secrets):
                    cut = i
                    break
        moved = True
        while moved:
            moved = False
            for secret in self.secrets:
                j = data.find(secret, max(0, cut - len(secret) + 1))
                if -1 < j < cut < j + len(secret):
                    cut, moved = j, True
        return cut

    def feed(self, chunk: bytes) -> bytes:
        """The scrubbed output that is safe to emit after ``chunk``."""
        if not self.secrets:
            return chunk
        data = self.pending + chunk
        cut = self._cut(data)
        self.pending = data[cut:]
        return scrub(data[:cut], self.secrets)

    def flush(self) -> bytes:
        """What is still held (end of stream), scrubbed."""
        data, self.pending = scrub(self.pending, self.secrets), b""
        return data


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
