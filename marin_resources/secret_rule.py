"""The one rule for secrets: which names hold one, and how short a value may be to stay in free text.

Both the engine's masking (:mod:`marin_assets.execution.secrets`: records, errors, metadata, logs)
and the Ray launch (:mod:`marin_resources.runtime_env`: secret variables kept out of a task's
``runtime_env``, which Ray logs) read it, so what Ray is kept from seeing and what the engine masks
never differ. No Dagster import, no ``marin_assets`` import.
"""

from __future__ import annotations

import re
from functools import lru_cache

# The one minimum: a secret value shorter than this is not scrubbed out of free text (errors, logs,
# metadata, a Ray job's output) -- it would blank ordinary words and paths (a flag such as
# ``AUTH_ENABLED=true``); such a value is still hidden in its own field, by name.
MIN_SECRET_LENGTH = 8

# Word-wise (snake_case, kebab-case, dotted, camelCase) names of fields that hold credentials:
# keys, passwords (``DB_PASS``, ``PGPASSWORD``), tokens (``*_TOKEN``), personal access tokens
# (``GITHUB_PAT``) and connection strings that carry a password (``DATABASE_URL``, ``SENTRY_DSN``).
_SECRET_WORDS = re.compile(
    r"(^|_)(api_?key|access_?key|secret(_?(access_?)?key)?|[a-z]*password|[a-z]*passwd|pass|"
    r"private_?key|credentials?|auth(_?token)?|authorization|access_?token|refresh_?token|bearer|"
    r"[a-z]*token|pat|client_?secret|session_?key|cookie|passphrase|dsn|connection_?string|conn_?str|"
    r"(database|db|postgres(ql)?|pg|mysql|redis|mongo(db)?|amqp|broker|sqlalchemy)_(url|uri)|"
    r"(ssh|signing|sign|encryption|master|license|openai|anthropic|gpg|pgp|deploy|hmac|jwt|"
    r"service_?account|sa)_?keys?)(_|$)"
)
# ``OPENAI_KEY``, ``SSH_KEY``: an environment-variable-style name (upper case) ending in ``KEY`` is a
# credential; lower-case config fields such as ``text_key`` or ``partition_key`` name columns.
_ENV_KEY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*_KEYS?$|^KEY$")
# Tokenizer vocabulary fields are not credentials.
_NOT_SECRET = re.compile(
    r"(^|_)((bos|eos|pad|unk|sep|cls|mask|start|end|special)_tokens?|[a-z]*tokens|tokenizer[a-z_]*|"
    r"(max|num|min|total)_[a-z_]*token|tokenized)(_|$)"
)


def _words(key: str) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")


@lru_cache(maxsize=4096)  # config keys repeat across thousands of steps
def is_secret_name(key: str) -> bool:
    """True when a field / variable name looks like it holds a credential."""
    key = str(key)
    if _ENV_KEY_NAME.match(key):
        return True
    words = _words(key)
    return bool(_SECRET_WORDS.search(words)) and not _NOT_SECRET.search(words)
