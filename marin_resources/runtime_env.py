"""Ray ``runtime_env`` for a step: pip dependency groups and pass-through environment variables.

No Dagster import here: the step engine uses this directly.

A step names ``pip_dependency_groups`` like Marin does: names of ``[project.optional-dependencies]``
groups of this project's ``pyproject.toml`` (expanded to their requirement strings) or plain pip
requirements. Requirements that the driver's environment already satisfies are dropped by default:
the embedded Ray's workers run the driver's interpreter, and the production Ray workers run the same
image as the user code, so reinstalling them would only cost a virtualenv build per step (and fail
offline). Set ``skip_installed=False`` (or ``MARIN_RAY_PIP_SKIP_INSTALLED=0``) when Ray workers
run a different image.

Environment variables that change how steps behave (``JAX_PLATFORMS``, Hugging Face offline flags,
wandb mode, ...) are copied from the driver, because Ray workers inherit the environment of the
process that started the raylet, not the driver's. Secrets (API keys, tokens) are passed only on
request, and :func:`redact_runtime_env` hides them before anything is logged.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from marin_resources.secret_rule import is_secret_name

logger = logging.getLogger(__name__)

# Copied from the driver when set: they select devices, caches and offline modes.
PASSTHROUGH_ENV_VARS: tuple[str, ...] = (
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
    "JAX_TRACEBACK_FILTERING",
    "XLA_FLAGS",
    "LIBTPU_INIT_ARGS",
    "TPU_MIN_LOG_LEVEL",
    "TPU_STDERR_LOG_LEVEL",
    "HF_HOME",
    "HF_DATASETS_CACHE",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "WANDB_MODE",
    "WANDB_PROJECT",
    "WANDB_ENTITY",
    "WANDB_DIR",
    "MARIN_PREFIX",
    "MARIN_RAY_DASHBOARD_URL",  # base of the Ray dashboard links in step metadata
    "GOOGLE_CLOUD_PROJECT",
    "GOOGLE_APPLICATION_CREDENTIALS",  # a path to a key file; its contents are never read here
    "STORAGE_EMULATOR_HOST",  # a GCS API emulator (tests, local deployment)
    "FSSPEC_GCS_TOKEN",  # gcsfs credentials method or key-file path, e.g. "anon" for an emulator
    "TENSORSTORE_GCS_HTTP_URL",  # the same emulator for tensorstore (Levanter caches, checkpoints)
)
# Passed only with include_secrets=True (the runtime env is stored in Ray's GCS and shown by the
# dashboard); on Kubernetes the Ray pods get them from a Secret instead.
SECRET_ENV_VARS: tuple[str, ...] = ("WANDB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
REDACTED = "***"


def split_secret_env_vars(runtime_env: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """``(runtime_env without its secret env vars, those vars)``.

    Ray writes every task's whole ``runtime_env`` -- ``env_vars`` values included -- into the node's
    ``runtime_env_agent.log`` (world-readable, under Ray's temp dir) and shows it in the dashboard, so
    a secret must not travel there: the launcher ships the secret vars with the task's function
    instead (:func:`with_secret_environment`), which Ray stores in its GCS but never logs.
    """
    if not runtime_env:
        return (dict(runtime_env) if runtime_env is not None else None), {}
    env_vars = dict(runtime_env.get("env_vars") or {})
    secrets = {k: str(v) for k, v in env_vars.items() if is_secret_name(k)}
    if not secrets:
        return dict(runtime_env), {}
    public = {k: v for k, v in runtime_env.items() if k != "env_vars"}
    rest = {k: v for k, v in env_vars.items() if k not in secrets}
    if rest:
        public["env_vars"] = rest
    return public, secrets


def with_secret_environment(fn: Callable[..., Any], secrets: Mapping[str, str]) -> Callable[..., Any]:
    """``fn`` that runs with ``secrets`` in ``os.environ`` (so the subprocesses it starts inherit them)
    and puts the environment back afterwards (a Ray worker process runs later tasks too)."""
    if not secrets:
        return fn
    secrets = dict(secrets)

    def call(*args: Any, **kwargs: Any) -> Any:
        saved = {k: os.environ.get(k) for k in secrets}
        os.environ.update(secrets)
        try:
            return fn(*args, **kwargs)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    call.__name__ = getattr(fn, "__name__", "step")
    for attr in ("ray_task_name",):  # ray_jobs.TASK_NAME_ATTR: the task keeps the step's name
        if hasattr(fn, attr):
            setattr(call, attr, getattr(fn, attr))
    return call


def default_pyproject_path() -> Path:
    """``$MARIN_PYPROJECT``, else this project's ``pyproject.toml`` (source checkout), else ``./pyproject.toml``."""
    if os.environ.get("MARIN_PYPROJECT"):
        return Path(os.environ["MARIN_PYPROJECT"])
    repo = Path(__file__).resolve().parents[1] / "pyproject.toml"
    return repo if repo.exists() else Path.cwd() / "pyproject.toml"


@lru_cache(maxsize=8)
def _load_project(path: str, mtime: float) -> tuple[str, dict[str, tuple[str, ...]]]:
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    project = data.get("project", {})
    groups = project.get("optional-dependencies", {}) or {}
    return str(project.get("name", "")), {name: tuple(reqs) for name, reqs in groups.items()}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def expand_dependency_groups(names: Iterable[str], pyproject_path: str | os.PathLike[str] | None = None) -> list[str]:
    """Group names -> their requirement strings (recursively through ``project[group]``); other
    entries are kept as pip requirements. Order is kept, duplicates are dropped."""
    path = Path(pyproject_path) if pyproject_path else default_pyproject_path()
    project_name, groups = ("", {})
    if path.exists():
        project_name, groups = _load_project(str(path), path.stat().st_mtime)
    by_norm = {_normalize(g): g for g in groups}
    out: list[str] = []
    seen_groups: set[str] = set()

    def add(entry: str) -> None:
        entry = entry.strip()
        if not entry:
            return
        group = by_norm.get(_normalize(entry))
        # "marin-dagster[train,eval]" inside a group refers back to this project's own groups.
        self_ref = re.fullmatch(r"([A-Za-z0-9][\w.-]*)\[([^\]]+)\]", entry)
        if group is None and self_ref and project_name and _normalize(self_ref.group(1)) == _normalize(project_name):
            for sub in self_ref.group(2).split(","):
                add(sub)
            return
        if group is None:
            if entry not in out:
                out.append(entry)
            return
        if group in seen_groups:
            return
        seen_groups.add(group)
        for requirement in groups[group]:
            add(requirement)

    for name in names:
        add(name)
    return out


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def requirement_satisfied(requirement: str) -> bool:
    """Whether this interpreter already satisfies a pip requirement string.

    URLs, paths and unparsable strings count as unsatisfied (pip must see them). Extras are checked
    through the installed distribution's own requirements for that extra.
    """
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return False
    if req.url:
        return False
    if req.marker is not None and not req.marker.evaluate():
        return True  # not meant for this platform: nothing to install
    version = _dist_version(req.name)
    if version is None or not req.specifier.contains(version, prereleases=True):
        return False
    for extra in req.extras:
        for sub in metadata.requires(req.name) or []:
            try:
                sub_req = Requirement(sub)
            except InvalidRequirement:
                continue
            if sub_req.marker is None or not sub_req.marker.evaluate({"extra": extra}):
                continue
            sub_version = _dist_version(sub_req.name)
            if sub_version is None or not sub_req.specifier.contains(sub_version, prereleases=True):
                return False
    return True


def passthrough_env_vars(include_secrets: bool = False, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment variables of the driver that Ray workers should see (set ones only)."""
    environ = os.environ if environ is None else environ
    names = PASSTHROUGH_ENV_VARS + (SECRET_ENV_VARS if include_secrets else ())
    return {name: environ[name] for name in names if environ.get(name) is not None}


def redact_runtime_env(runtime_env: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``runtime_env`` safe to log: values of secret-looking env vars become ``***``."""
    out = dict(runtime_env)
    if isinstance(out.get("env_vars"), Mapping):
        out["env_vars"] = {key: (REDACTED if is_secret_name(key) else value) for key, value in out["env_vars"].items()}
    return out


def runtime_env_for(
    pip_dependency_groups: list[str] | None,
    pyproject_path: str | os.PathLike[str] | None = None,
    *,
    skip_installed: bool | None = None,
    include_secrets: bool = False,
    env_vars: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Ray ``runtime_env`` of a step.

    Args:
        pip_dependency_groups: optional-dependency group names of the project and/or pip
            requirement strings. None or empty (and no ``env_vars``) gives ``{}``.
        pyproject_path: the pyproject.toml with the groups (default: :func:`default_pyproject_path`).
        skip_installed: drop requirements this interpreter already satisfies (default True, or
            ``$MARIN_RAY_PIP_SKIP_INSTALLED``).
        include_secrets: also pass ``WANDB_API_KEY``/``HF_TOKEN`` when set.
        env_vars: extra environment variables (override the pass-through ones).

    Returns:
        ``{"pip": [...], "env_vars": {...}}`` with empty parts left out.
    """
    if not pip_dependency_groups and not env_vars:
        return {}
    if skip_installed is None:
        skip_installed = os.environ.get("MARIN_RAY_PIP_SKIP_INSTALLED", "1").lower() not in {"0", "false", "no"}
    requirements = expand_dependency_groups(pip_dependency_groups or [], pyproject_path)
    to_install = [r for r in requirements if not (skip_installed and requirement_satisfied(r))]
    runtime_env: dict[str, Any] = {}
    if to_install:
        runtime_env["pip"] = to_install
    variables = passthrough_env_vars(include_secrets)
    variables.update(env_vars or {})
    if variables:
        runtime_env["env_vars"] = variables
    logger.debug(
        "runtime_env for %s: %s (%d requirement(s) already installed)",
        pip_dependency_groups,
        redact_runtime_env(runtime_env),
        len(requirements) - len(to_install),
    )
    return runtime_env
