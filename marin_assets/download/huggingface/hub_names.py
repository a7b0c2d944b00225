"""Hub names a step reads -- a tokenizer (``gpt2``, ``meta-llama/Meta-Llama-3.1-8B``), the dataset of
an lm-eval task -- resolved to a folder, in this order:

1. the hub mirror of the prefix (:func:`.hub.mirrored`): what an earlier run fetched, no network;
2. with ``HF_HUB_OFFLINE=1``: the local Hugging Face cache only (as before), else an error naming the
   name, the places looked at and how to make it available;
3. the hub (``$HF_ENDPOINT``) through ``huggingface_hub``'s client, into the mirror
   (:func:`.hub.hub_snapshot`); a hub that does not accept connections falls back to the local cache
   when that has the name, and otherwise fails within seconds naming the host.
"""

from __future__ import annotations

import logging
import os
import tempfile

from marin_assets.download.huggingface import hub
from marin_assets.execution.storage import filesystem, is_local

logger = logging.getLogger(__name__)

# The files a tokenizer needs (no weights): tokenizer.json, tokenizer_config.json, vocab/merges,
# sentencepiece models, config.json (AutoTokenizer reads the model type from it).
TOKENIZER_FILES = ("*.json", "*.model", "*.txt", "*.tiktoken", "*.jinja")


def cached_snapshot(repo_id: str, repo_type: str) -> str | None:
    """The local Hugging Face cache's snapshot of ``repo_id`` (main), or None."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        return snapshot_download(repo_id, repo_type=repo_type, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def resolve_hub_repo(repo_id: str, repo_type: str, patterns: tuple[str, ...] | None, what: str, hint: str) -> str:
    """A folder (local or ``gs://``) holding ``repo_id`` (see the module docstring for the order).

    Raises:
        FileNotFoundError: offline and not in the mirror nor the cache (names ``hint``).
        hub.HubUnreachableError: the hub does not accept connections and the cache lacks it.
        hub.HubNotFoundError: the hub has no such repository.
    """
    found = hub.mirrored(repo_id, repo_type, "main")
    if found is not None:
        return found
    if hub.hub_offline():
        cached = cached_snapshot(repo_id, repo_type)
        if cached is not None:
            return cached
        raise FileNotFoundError(
            f"{what} is neither a local directory, in the hub mirror ({hub.mirror_root()}), nor in the local "
            f"Hugging Face cache (HF_HUB_OFFLINE=1); {hint}"
        )
    try:
        return hub.hub_snapshot(repo_id, repo_type, "main", patterns, what=what)
    except hub.HubUnreachableError as unreachable:
        cached = cached_snapshot(repo_id, repo_type)
        if cached is None:
            raise
        logger.warning("%s; using the copy in the local Hugging Face cache (%s)", unreachable, cached)
        return cached


def resolve_hub_tokenizer(name: str, hint: str) -> str:
    """A folder holding the tokenizer files of the hub model ``name``."""
    return resolve_hub_repo(name, "model", TOKENIZER_FILES, f"tokenizer {name!r}", hint)


def local_folder(folder: str) -> str:
    """``folder`` itself when local; a remote (``gs://``) folder copied once to this machine's temp dir
    (for readers that need local files: ``datasets.load_dataset``, lm-eval)."""
    if is_local(folder):
        return folder
    fs, root = filesystem(folder)
    target = os.path.join(tempfile.gettempdir(), "marin-hf-mirror", root.strip("/").replace("/", "--"))
    done = os.path.join(target, ".complete")
    if not os.path.exists(done):
        os.makedirs(target, exist_ok=True)
        fs.get(root.rstrip("/") + "/", target + "/", recursive=True)
        with open(done, "w") as handle:
            handle.write(folder)
    return target
