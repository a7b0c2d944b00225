"""Secrets in step configs: passed by reference, never written down (no Dagster import).

A config field that needs a credential holds an :class:`EnvSecret` -- the *name* of an environment
variable -- instead of the value::

    TrainConfig(..., wandb_api_key=secret_from_env("WANDB_API_KEY"))

The reference is what enters the version (``versioned(secret_from_env("X"))`` versions the name
only, so rotating a key does not recompute anything) and what ``.executor_info``, experiment
records and Dagster metadata show. The runner replaces it by the variable's value just before it
calls the step function (:func:`resolve_secrets`); a missing variable fails that step with a
message naming the variable.

Everything the engine writes down also goes through :func:`redact_secrets`: the values of fields
whose names look secret (``api_key``, ``token``, ``password``, ``secret``, ``credentials`` ...) are
replaced by ``"***"``, so a plain string put in such a field by mistake is not stored either; and
the credentials inside any URL (``https://user:password@host`` becomes ``https://***@host``) are
hidden in every string field, whatever its name.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "***"

# Word-wise (snake_case, kebab-case, dotted, camelCase) names of fields that hold credentials.
_SECRET_WORDS = re.compile(
    r"(^|_)(api_?key|access_?key|secret(_?(access_?)?key)?|password|passwd|private_?key|credentials?|"
    r"auth(_?token)?|access_?token|refresh_?token|bearer|token|client_?secret|session_?key)(_|$)"
)
# Tokenizer vocabulary fields are not credentials.
_NOT_SECRET = re.compile(r"(^|_)(bos|eos|pad|unk|sep|cls|mask|start|end|special)_tokens?(_|$)")
# ``name='value'`` inside a dataclass repr: a versioned dataclass enters the version as its repr
# (Marin's encoder), so a credential field of one would otherwise be written down verbatim.
_REPR_FIELD = re.compile(r"""\b([A-Za-z_]\w*)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
# ``'KEY': 'value'`` inside a dict repr (a resource config's ``runtime_env={'env_vars': {...}}``).
_REPR_ITEM = re.compile(r"""(['"])([A-Za-z_][\w.-]*)\1(\s*:\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


# ``scheme://user:password@host`` (or ``scheme://token@host``): the userinfo of a URL is a credential
# wherever the URL sits (``endpoint="https://user:pw@host"``), whatever the field is called.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@'\"]+)@")


class MissingSecretError(RuntimeError):
    """A step needs a secret whose environment variable is not set."""


@dataclasses.dataclass(frozen=True)
class EnvSecret:
    """A reference to a secret held in the environment variable ``env`` of the runner."""

    env: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.env or ""):
            raise ValueError(f"not an environment variable name: {self.env!r}")

    def resolve(self) -> str:
        """The secret's value (raises MissingSecretError when the variable is unset or empty)."""
        value = os.environ.get(self.env)
        if not value:
            raise MissingSecretError(f"secret {self.env}: environment variable ${self.env} is not set for this run")
        return value

    def __repr__(self) -> str:
        return f"EnvSecret({self.env!r})"


def secret_from_env(name: str) -> EnvSecret:
    """A config value resolved at run time from ``$name``; only the name is ever stored."""
    return EnvSecret(name)


def _words(key: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")


@functools.lru_cache(maxsize=4096)  # config keys repeat across thousands of steps
def is_secret_name(key: str) -> bool:
    """True when a field / variable name looks like it holds a credential."""
    words = _words(str(key))
    return bool(_SECRET_WORDS.search(words)) and not _NOT_SECRET.search(words)


def _redact_repr_fields(text: str) -> str:
    """``text`` with the quoted values of secret-looking ``name='...'`` fields replaced by ``'***'``."""

    def hide(match: re.Match[str]) -> str:
        return f"{match.group(1)}='{REDACTED}'" if is_secret_name(match.group(1)) else match.group(0)

    def hide_item(match: re.Match[str]) -> str:
        quote, key, colon = match.group(1), match.group(2), match.group(3)
        return f"{quote}{key}{quote}{colon}'{REDACTED}'" if is_secret_name(key) else match.group(0)

    if "@" in text and "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "=" in text:
        text = _REPR_FIELD.sub(hide, text)
    return _REPR_ITEM.sub(hide_item, text) if ":" in text else text


def redact_secrets(value: Any) -> Any:
    """A JSON-like copy of ``value`` with secret-looking fields' values replaced by ``"***"``.

    Dataclasses become dicts (as ``dataclasses.asdict``); an :class:`EnvSecret` stays visible as
    ``{"env": NAME}`` -- it is a reference, not a secret. Only string values are hidden; containers
    are searched recursively rather than hidden wholesale. Inside a string that holds a dataclass
    repr (how a versioned dataclass is stored in a version), secret-looking quoted fields are hidden.
    """
    if isinstance(value, str):
        return _redact_repr_fields(value)
    if isinstance(value, EnvSecret):
        return {"env": value.env}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            plain = redact_secrets(item)
            if is_secret_name(str(key)) and isinstance(plain, (str, bytes)) and plain not in ("", b"", REDACTED):
                plain = REDACTED  # strings only: a count or flag named "tokens_..." holds no secret
            out[key] = plain
        return out
    if isinstance(value, (list, tuple)):
        return [redact_secrets(item) for item in value]
    return value


def resolve_secrets(value: Any) -> Any:
    """``value`` with every :class:`EnvSecret` replaced by its value (frozen dataclasses rebuilt)."""
    if isinstance(value, EnvSecret):
        return value.resolve()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            current = getattr(value, f.name)
            resolved = resolve_secrets(current)
            if resolved is not current:
                changes[f.name] = resolved
        return dataclasses.replace(value, **changes) if changes else value
    if isinstance(value, dict):
        items = {k: resolve_secrets(v) for k, v in value.items()}
        return items if any(items[k] is not value[k] for k in value) else value
    if isinstance(value, (list, tuple)):
        items = [resolve_secrets(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if isinstance(value, list) else tuple(items)
    return value


def secret_values(value: Any, _key: str = "") -> set[str]:
    """The secret strings a config holds: resolved :class:`EnvSecret` values and the string values
    of secret-looking fields (at least 4 characters, so that scrubbing stays meaningful)."""
    found: set[str] = set()
    if isinstance(value, EnvSecret):
        resolved = os.environ.get(value.env, "")
        return {resolved} if len(resolved) >= 4 else set()
    if isinstance(value, str):
        return {value} if _key and is_secret_name(_key) and len(value) >= 4 else set()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        for key, item in value.items():
            found |= secret_values(item, str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found |= secret_values(item, _key)
    return found


# Shorter values of secret-named variables (flags such as AUTH_ENABLED=true) are not credentials,
# and scrubbing them would blank ordinary words out of error messages.
MIN_ENV_SECRET_LENGTH = 8


def environment_secrets() -> set[str]:
    """Values of the runner's own environment variables whose names look secret
    (``AWS_SECRET_ACCESS_KEY``, ``WANDB_API_KEY``, ``HF_TOKEN`` ...): a step may quote them in an
    error or return them, and neither may be written down."""
    return {value for name, value in os.environ.items() if len(value) >= MIN_ENV_SECRET_LENGTH and is_secret_name(name)}


def scrub_values(value: Any, secrets: set[str]) -> Any:
    """A JSON-like copy of ``value`` (redacted as :func:`redact_secrets` does) in which every string
    has the given secret strings replaced by ``***`` -- for what a step returns, which may quote a
    secret it was given under any key."""
    value = redact_secrets(value)
    if not secrets:
        return value
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {
            scrub_values(k, secrets) if isinstance(k, str) else k: scrub_values(v, secrets) for k, v in value.items()
        }
    if isinstance(value, list):
        return [scrub_values(item, secrets) for item in value]
    return value


def scrub(text: str, secrets: set[str]) -> str:
    """``text`` with every occurrence of the given secret strings replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
