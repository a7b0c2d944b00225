"""Secrets in step configs: passed by reference, never written down (no Dagster import).

A config field that needs a credential holds an :class:`EnvSecret` -- the *name* of an environment
variable -- instead of the value::

    TrainConfig(..., wandb_api_key=secret_from_env("WANDB_API_KEY"))

The reference is what enters the version (``versioned(secret_from_env("X"))`` versions the name
only, so rotating a key does not recompute anything) and what ``.executor_info``, experiment
records and Dagster metadata show. The runner replaces it by the variable's value just before it
calls the step function (:func:`resolve_secrets`); a missing variable fails that step with a
message naming the variable.

Everything the engine writes down (``.executor_info``, the experiment JSON, step metadata, Dagster
metadata, error messages) also goes through :func:`redact_secrets`, at any depth of the config --
dict values, lists, tuples, nested dataclasses, and the reprs of versioned dataclasses:

* **environments by name only**: an ``env_vars`` mapping (Ray's ``runtime_env``, a training
  config's ``env_vars``) keeps its variable names, every value becomes ``"***"`` -- also inside a
  resource config's repr;
* **by key name**: the values of fields and dict keys whose names look secret (``api_key``,
  ``token``, ``password``, ``secret``, ``credentials``, ``Authorization``, ``Cookie``, ``*_TOKEN``,
  ``DB_PASS``, ``PGPASSWORD``, ``GITHUB_PAT``, ``DATABASE_URL``, ``*_DSN``, and upper-case
  environment names ending in ``_KEY`` such as ``OPENAI_KEY`` or ``SSH_KEY``) are
  replaced by ``"***"``, so a plain string put in such a field by mistake is not stored either;
* **by form**: the credentials inside any URL (``https://user:password@host`` becomes
  ``https://***@host``) and after an HTTP auth scheme (``Bearer <token>``, ``Basic <user:pass in
  base64>``) are hidden in every string, whatever its key;
* **by known value**: every string is scrubbed of the secret values the config holds (resolved
  :class:`EnvSecret` values, the values of secret-named fields) and of the runner's own
  secret-named environment variables (``HF_TOKEN``, ``WANDB_API_KEY`` ...), wherever they were
  copied (``headers={"X-Key": <the api_key's value>}``), when at least
  :data:`~marin_resources.secret_rule.MIN_SECRET_LENGTH` characters long (one rule, one minimum:
  :mod:`marin_resources.secret_rule`, which also keeps secret variables out of Ray's ``runtime_env``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from marin_resources.secret_rule import MIN_SECRET_LENGTH, is_secret_name

REDACTED = "***"

# ``name='value'`` inside a dataclass repr: a versioned dataclass enters the version as its repr
# (Marin's encoder), so a credential field of one would otherwise be written down verbatim.
_REPR_FIELD = re.compile(r"""\b([A-Za-z_]\w*)=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
# ``'KEY': 'value'`` inside a dict repr (a resource config's ``runtime_env={'env_vars': {...}}``).
_REPR_ITEM = re.compile(r"""(['"])([A-Za-z_][\w.-]*)\1(\s*:\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


# Fields holding a process environment (Ray's ``runtime_env={"env_vars": ...}``, Marin's
# ``env_vars=``): recorded by variable name only, whatever the names -- a neutral name such as
# ``SERVICE_CONFIG`` may still carry a credential.
ENVIRONMENT_FIELDS = frozenset({"env_vars", "environment_variables"})
# ``env_vars={...}`` / ``'env_vars': {...}`` inside a repr (a resource config's runtime_env).
_REPR_ENV = re.compile(r"""(['"]?)(env_vars|environment_variables)\1(\s*[:=]\s*)\{([^{}]*)\}""")
_REPR_QUOTED_VALUE = re.compile(r"""(:\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


# ``scheme://user:password@host`` (or ``scheme://token@host``): the userinfo of a URL is a credential
# wherever the URL sits (``endpoint="https://user:pw@host"``), whatever the field is called.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/@'\"]+)@")
# An HTTP Authorization value wherever it sits (``["-H", "Authorization: Bearer ..."]``): a bearer
# token, or a Basic credential (base64 of ``user:password``; checked, so prose stays readable).
_BEARER = re.compile(r"(?i)\b(bearer\s+)([^\s'\",;]{8,})")
_BASIC = re.compile(r"\b(Basic\s+)([A-Za-z0-9+/]{6,}={0,2})(?![A-Za-z0-9+/=])")

# A line of a multi-line secret (a PEM body line, a service-account JSON line) this long is secret
# on its own; shorter ones ("{", "}", "-----END") would blank out ordinary log text.
MIN_SECRET_LINE = 20
REDACTED_BYTES = REDACTED.encode()


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


def _is_basic_credential(text: str) -> bool:
    import base64
    import binascii

    try:
        return b":" in base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


def _redact_text(text: str, known: tuple[str, ...] = ()) -> str:
    """``text`` with credentials hidden: quoted values of secret-looking ``name='...'`` fields and
    ``'key': '...'`` items (dataclass / dict reprs), URL userinfo, Bearer / Basic credentials and
    every occurrence of the ``known`` secret values (longest first)."""

    def hide(match: re.Match[str]) -> str:
        return f"{match.group(1)}='{REDACTED}'" if is_secret_name(match.group(1)) else match.group(0)

    def hide_item(match: re.Match[str]) -> str:
        quote, key, colon = match.group(1), match.group(2), match.group(3)
        return f"{quote}{key}{quote}{colon}'{REDACTED}'" if is_secret_name(key) else match.group(0)

    def hide_basic(match: re.Match[str]) -> str:
        return f"{match.group(1)}{REDACTED}" if _is_basic_credential(match.group(2)) else match.group(0)

    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "@" in text and "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    if "Basic" in text:
        text = _BASIC.sub(hide_basic, text)
    if "env" in text:
        text = _REPR_ENV.sub(
            lambda m: (
                f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}{{"
                + _REPR_QUOTED_VALUE.sub(lambda v: f"{v.group(1)}'{REDACTED}'", m.group(4))
                + "}"
            ),
            text,
        )
    if "=" in text:
        text = _REPR_FIELD.sub(hide, text)
    return _REPR_ITEM.sub(hide_item, text) if ":" in text else text


def known_secrets(value: Any, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The secret values to scrub from every string of ``value``: those it holds
    (:func:`secret_values`), the runner's secret-named environment variables and ``extra`` --
    in every form :func:`secret_strings` scrubs, longest first (a secret that contains another is
    hidden whole)."""
    return tuple(secret_strings(secret_values(value) | environment_secrets() | set(extra)))


def redact_secrets(value: Any, extra: Iterable[str] = ()) -> Any:
    """A JSON-like copy of ``value`` with its secrets hidden as ``"***"``, at any depth.

    Dataclasses become dicts (as ``dataclasses.asdict``); an :class:`EnvSecret` stays visible as
    ``{"env": NAME}`` -- it is a reference, not a secret. Secret-named fields' string values are
    hidden (containers under them are searched rather than hidden wholesale; a count named
    ``num_tokens`` holds no secret); every string -- and every string key -- is scrubbed of URL
    userinfo, Bearer / Basic credentials and the known secret values (:func:`known_secrets` of
    ``value`` plus ``extra``); inside a string holding a dataclass or dict repr (how a versioned
    dataclass is stored in a version), secret-looking quoted fields are hidden.
    """
    return _redact(value, known_secrets(value, extra))


def _redact(value: Any, known: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return _redact_text(value, known)
    if isinstance(value, EnvSecret):
        return {"env": value.env}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if key in ENVIRONMENT_FIELDS and isinstance(item, Mapping):
                # By name only: {"NAME": "***"} (an EnvSecret reference stays visible as such).
                out[key] = {name: {"env": v.env} if isinstance(v, EnvSecret) else REDACTED for name, v in item.items()}
                continue
            plain = _redact(item, known)
            if is_secret_name(str(key)) and isinstance(plain, (str, bytes)) and plain not in ("", b"", REDACTED):
                plain = REDACTED  # strings only: a count or flag named "tokens_..." holds no secret
            out[_redact_text(key, known) if isinstance(key, str) else key] = plain
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_redact(item, known) for item in value]
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
    """The secret strings a config holds: resolved :class:`EnvSecret` values, the string values
    of secret-looking fields and of ``env_vars`` mappings (at least :data:`MIN_SECRET_LENGTH` characters:
    shorter ones are hidden in their own field, by name, never scrubbed out of free text)."""
    found: set[str] = set()
    if isinstance(value, EnvSecret):
        resolved = os.environ.get(value.env, "")
        return {resolved} if len(resolved) >= MIN_SECRET_LENGTH else set()
    if isinstance(value, str):
        return {value} if _key and is_secret_name(_key) and len(value) >= MIN_SECRET_LENGTH else set()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in ENVIRONMENT_FIELDS and isinstance(item, Mapping):
                # Every value of an environment is treated as secret (it is recorded by name only).
                found |= {v for v in item.values() if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
            found |= secret_values(item, str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found |= secret_values(item, _key)
    return found


def environment_secrets() -> set[str]:
    """Values of the runner's own environment variables whose names look secret
    (``AWS_SECRET_ACCESS_KEY``, ``WANDB_API_KEY``, ``HF_TOKEN`` ...): a step may quote them in an
    error or return them, and neither may be written down."""
    return {value for name, value in os.environ.items() if len(value) >= MIN_SECRET_LENGTH and is_secret_name(name)}


def scrub_values(value: Any, secrets: set[str]) -> Any:
    """:func:`redact_secrets` of ``value`` that also scrubs the given secret strings -- for what a
    step returns, which may quote a secret it was given under any key."""
    return redact_secrets(value, secrets)


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
    """Every string that reveals ``value`` in text: the value and its escaped forms, and for a
    multi-line value (real newlines or ``\\n`` escapes, as in a service-account JSON's key) each
    line of :data:`MIN_SECRET_LINE`+ characters with its escaped forms."""
    forms = _escaped_forms(value)
    if "\n" in value or "\\n" in value:
        for line in re.split(r"\r?\n|\\n", value):
            line = line.strip()
            if len(line) >= MIN_SECRET_LINE:
                forms |= _escaped_forms(line)
    return forms


def secret_strings(values: Iterable[str]) -> list[str]:
    """What the scrubber replaces for the secret ``values``: every form (:func:`secret_forms`) of
    each value of :data:`MIN_SECRET_LENGTH`+ characters, longest first."""
    found: set[str] = set()
    for value in values:
        if len(value) >= MIN_SECRET_LENGTH:
            found |= {form for form in secret_forms(value) if len(form) >= MIN_SECRET_LENGTH}
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of the given secret values replaced by ``***`` (the one scrubber:
    errors, metadata, Ray job logs; values shorter than :data:`MIN_SECRET_LENGTH` are left)."""
    for secret in secret_strings(secrets):
        text = text.replace(secret, REDACTED)
    return text


def stream_secrets(values: Iterable[str]) -> list[bytes]:
    """:func:`secret_strings` as bytes, for :class:`StreamScrubber` and :func:`scrub_bytes`."""
    return [form.encode() for form in secret_strings(values)]


def scrub_bytes(data: bytes, secrets: list[bytes]) -> bytes:
    """``data`` with every secret replaced by ``***`` (``secrets`` from :func:`stream_secrets`)."""
    for secret in secrets:
        data = data.replace(secret, REDACTED_BYTES)
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
        return scrub_bytes(data[:cut], self.secrets)

    def flush(self) -> bytes:
        """What is still held (end of stream), scrubbed."""
        data, self.pending = scrub_bytes(self.pending, self.secrets), b""
        return data
