"""Attempt staging: what a runner writes is published only while it still holds the step's lease.

Each attempt at a unit (a step, or one partition) gets a *staging folder* beside its output,
``<parent>/.marin_attempts/<name>/<attempt id>/<name>`` for the output ``<parent>/<name>`` -- outside
the output folder, so nothing a stopped attempt leaves behind ever sits inside a published output,
and with the same last name, so code that derives a run name from its output path keeps doing so;
on the same filesystem or bucket, so publishing never moves bytes between stores. The step function's ``output_path`` (``this_output_path()``)
resolves there, so everything it writes -- with fsspec, plain files, a subprocess, a Ray task --
lands in the staging folder. When the function returns, the runner *publishes* the staging folder
(:func:`publish`) and only then records SUCCESS:

* local / POSIX: the old entries of the output are renamed into the attempt's ``.marin_trash`` and each
  top-level staged entry is renamed into the output -- O(1) per top-level entry, whatever its size;
* object stores (gs://): each staged object is copied server-side (GCS ``rewrite``, no bytes pass
  through the runner) to its final name, old objects are deleted with a generation precondition.

Files the step wrote that name its staging folder (Levanter's configs, summaries, stats) are
rewritten to name the output just before publishing (:func:`relocate_staged_text`): text files by
suffix, up to a size bound; binary files are never opened.

Why this fences a paused runner: a runner that takes the lease over from a holder that may still
be alive (stale, not provably dead) first *discards* that holder's staging folder
(:func:`discard_attempts`: one rename on a filesystem, deletes on an object store). Every write of the
old holder goes into its own staging folder, and every publishing operation it could still make
has its source (a staged entry) or its destination (its trash folder) inside that folder -- gone,
so the operation fails instead of touching the new holder's output. What a resumed runner writes
after the takeover ends up only in a discarded folder, never in an output that is or becomes SUCCESS.

Resume (Levanter checkpoints): a new attempt *adopts* the previous attempt's staging folder -- the
step function sees the same path and finds its checkpoints -- when that attempt is known to have
stopped: it recorded FAILED, released the lease, or its holder is provably dead (same host, pid
gone). After a takeover from a holder that only went stale (paused, cut off, on another machine:
it may still be alive) the new attempt *copies* that attempt's staging folder into its own
(:func:`copy_attempt`, server-side on object stores) and only then discards it: it continues from
the old checkpoints, and whatever the old holder writes afterwards lands in discarded objects.
Either way only *complete* checkpoints are adopted (:func:`incomplete_checkpoints`: a
``checkpoints/step-N`` folder without Levanter's ``metadata.json`` was still being written when its
writer stopped): such a folder is not copied, or deleted from an attempt adopted in place.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import uuid
from typing import Any

from marin_assets.execution.fence import Fence
from marin_assets.execution.storage import filesystem, is_local, join_path

logger = logging.getLogger(__name__)

ATTEMPTS_DIR = ".marin_attempts"
TRASH_DIR = ".marin_trash"
_EXECUTOR_FILE_PREFIX = ".executor_"
_COPY_BATCH = 128  # objects copied concurrently between two lease checks


def _split(output_path: str) -> tuple[str, str]:
    parent, _, name = output_path.rstrip("/").rpartition("/")
    return parent, name


def attempts_root(output_path: str) -> str:
    """The folder holding the attempts' staging folders of ``output_path``."""
    parent, name = _split(output_path)
    return join_path(parent, f"{ATTEMPTS_DIR}/{name}")


def staging_path(output_path: str, attempt_id: str) -> str:
    """The staging folder of attempt ``attempt_id`` of ``output_path`` (ends in the output's last name)."""
    return join_path(attempts_root(output_path), f"{attempt_id}/{_split(output_path)[1]}")


def published_path(path: str) -> str:
    """``path`` with a staging folder replaced by the output it is published to (other paths as given).

    For step code that looks *beside* its output (e.g. the earlier partitions of a partitioned step).
    """
    marker = f"/{ATTEMPTS_DIR}/"
    if marker not in path:
        return path
    head, _, tail = path.partition(marker)
    rest = tail.split("/", 2)  # the output's name, the attempt id, the output's name + the rest
    return join_path(head, rest[2]) if len(rest) > 2 else path


def _is_executor_entry(name: str) -> bool:
    # The runner's own files (status, info, metadata, lease and its mutex / temporary files that a
    # heartbeat may be writing at this moment) stay where they are.
    return name.startswith((_EXECUTOR_FILE_PREFIX, ".tmp-lease-"))


def _rel(full: str, root: str) -> str:
    return full[len(root.rstrip("/")) + 1 :]


def discard_attempts(output_path: str, keep: str | None = None) -> list[str]:
    """Make every staging folder at ``output_path`` except ``keep`` unpublishable; returns their ids.

    Local: each is renamed to a hidden ``.discarded-*`` name (one atomic rename: its old writer's
    later renames fail) and then deleted; object stores: its objects are deleted.
    """
    fs, root = filesystem(attempts_root(output_path))
    discarded: list[str] = []
    if is_local(output_path):
        try:
            names = os.listdir(root)
        except FileNotFoundError:
            return []
        for name in names:
            if name == keep:
                continue
            full = os.path.join(root, name)
            if not name.startswith(".discarded-"):
                gone = os.path.join(root, f".discarded-{uuid.uuid4().hex}")
                try:
                    os.rename(full, gone)
                except FileNotFoundError:
                    continue
                discarded.append(name)
                full = gone
            shutil.rmtree(full, ignore_errors=True)  # a resumed old writer may still add files: harmless
        return discarded
    try:
        objects = fs.find(root)
    except FileNotFoundError:
        return []
    by_attempt: dict[str, list[str]] = {}
    for full in objects:
        by_attempt.setdefault(_rel(full, root).split("/", 1)[0], []).append(full)
    for name, paths in by_attempt.items():
        if name == keep:
            continue
        with contextlib.suppress(FileNotFoundError):
            fs.rm(paths)
        discarded.append(name)
    return discarded


def prepare_staging(staging: str) -> None:
    """Create the staging folder of an attempt (a no-op on object stores, which have no folders)."""
    fs, p = filesystem(staging)
    for _ in range(20):
        try:
            fs.makedirs(p, exist_ok=True)
            return
        except FileNotFoundError:
            # Another step's publish removed an empty shared parent (``.marin_attempts``) between
            # two of these mkdirs (steps under the same folder run concurrently): create it again.
            continue
    fs.makedirs(p, exist_ok=True)


# Levanter's checkpoint folders (``checkpoints/step-N``, also one level deeper, e.g. per run id) and
# the marker Levanter writes last, once every array of the checkpoint is committed
# (``levanter.checkpoint._save_metadata`` in the tensorstore commit callback; its own
# ``discover_latest_checkpoint`` ignores a folder without it).
CHECKPOINTS_FOLDER = "checkpoints"
CHECKPOINT_MARKER = "metadata.json"
_CHECKPOINT_NAME = re.compile(r"(step|epoch)-\d+")


def incomplete_checkpoints(relative_files: list[str]) -> set[str]:
    """The checkpoint folders among ``relative_files`` (paths relative to an attempt's folder) that
    lack :data:`CHECKPOINT_MARKER`: checkpoints whose writer had not finished them."""
    complete: dict[str, bool] = {}
    for rel in relative_files:
        parts = rel.split("/")
        for i in range(1, len(parts) - 1):
            if _CHECKPOINT_NAME.fullmatch(parts[i]) and CHECKPOINTS_FOLDER in parts[:i]:
                folder = "/".join(parts[: i + 1])
                marker = i == len(parts) - 2 and parts[-1] == CHECKPOINT_MARKER
                complete[folder] = complete.get(folder, False) or marker
                break
    return {folder for folder, done in complete.items() if not done}


def _under(rel: str, folders: set[str]) -> bool:
    return any(rel.startswith(folder + "/") for folder in folders)


def drop_incomplete_checkpoints(staging: str) -> list[str]:
    """Delete the unfinished checkpoints of an attempt adopted in place (its holder has stopped):
    the new attempt resumes only from complete ones and never publishes a half-written one."""
    fs, root = filesystem(staging)
    try:
        files = [p for p, info in fs.find(root, detail=True).items() if info.get("type") != "directory"]
    except FileNotFoundError:
        return []
    partial = sorted(incomplete_checkpoints([_rel(p, root) for p in files]))
    for folder in partial:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(f"{root.rstrip('/')}/{folder}", recursive=True)
    if partial:
        logger.info("not adopted (no %s: unfinished when its writer stopped): %s", CHECKPOINT_MARKER, partial)
    return partial


def copy_attempt(source: str, dest: str, fence: Fence) -> int:
    """Copy the staging folder ``source`` (an attempt whose holder may still be alive) into ``dest``.

    For a takeover across hosts: the new attempt continues from the old one's checkpoints without
    sharing a single file with a writer it cannot stop. The copy is of a *snapshot*: the files
    listed once, at the start -- a file the old holder creates afterwards is not copied, and one
    it deletes meanwhile (an old checkpoint being rotated out) is skipped. Object stores copy
    server-side (GCS ``rewrite``, no bytes through this process), ``_COPY_BATCH`` objects at a
    time between lease checks; objects are written whole, so every object copied is complete. A
    local folder is copied file by file (never hard-linked or renamed: a writer holding an open
    file would then still be writing into the new attempt). Returns the number of files copied.

    Only complete checkpoints are copied: a checkpoint folder (``checkpoints/step-N``) whose
    completion marker (Levanter's ``metadata.json``, written last) is not in the snapshot is left
    out, whatever else of it was written -- a marker in the snapshot was written after the files it
    vouches for, which are then in the snapshot too. Other files are copied as they are.
    """
    fs, sroot = filesystem(source)
    _, droot = filesystem(dest)
    try:
        listed = [p for p, info in fs.find(sroot, detail=True).items() if info.get("type") != "directory"]
    except FileNotFoundError:
        return 0
    # Only what is whole: a checkpoint without its marker in the snapshot was still being written.
    partial = incomplete_checkpoints([_rel(src, sroot) for src in listed])
    if partial:
        logger.info("not adopted (no %s: still being written): %s", CHECKPOINT_MARKER, sorted(partial))
    pairs = sorted(
        (src, f"{droot.rstrip('/')}/{_rel(src, sroot)}") for src in listed if not _under(_rel(src, sroot), partial)
    )
    copied = 0
    if is_local(source):
        for i, (src, dst) in enumerate(pairs):
            if i % _COPY_BATCH == 0:
                fence.check()
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            try:
                shutil.copy2(src, dst)
            except FileNotFoundError:
                continue  # deleted by its writer since the listing
            copied += 1
        return copied
    for start in range(0, len(pairs), _COPY_BATCH):
        fence.check()
        batch = pairs[start : start + _COPY_BATCH]
        fs.copy([s for s, _ in batch], [d for _, d in batch], on_error="ignore")  # ignores only 404s
        copied += len(batch)
    return copied


def publish(staging: str, output_path: str, fence: Fence) -> int:
    """Move the staged output into ``output_path`` (replacing its earlier content); returns entries moved.

    ``fence.check()`` runs before every operation: a runner that lost its lease stops publishing,
    and one paused between a check and an operation finds its staging folder discarded.
    """
    if is_local(output_path):
        return _publish_local(filesystem(staging)[1], filesystem(output_path)[1], fence)
    return _publish_object_store(staging, output_path, fence)


def _publish_local(staging: str, output: str, fence: Fence) -> int:
    attempt_dir = os.path.dirname(staging)
    trash = os.path.join(attempt_dir, TRASH_DIR)
    # mkdir, not makedirs: the attempt's folder was created when the attempt started; if a new
    # holder has discarded it since, this fails rather than re-creating it.
    with contextlib.suppress(FileExistsError):
        os.mkdir(trash)
    staged = os.listdir(staging) if os.path.isdir(staging) else []  # a step may remove its own folder
    for name in os.listdir(output):
        if _is_executor_entry(name):
            continue
        fence.check()
        os.rename(os.path.join(output, name), os.path.join(trash, name))
    for name in staged:
        fence.check()
        os.rename(os.path.join(staging, name), os.path.join(output, name))
    shutil.rmtree(attempt_dir, ignore_errors=True)
    root = os.path.dirname(attempt_dir)
    with contextlib.suppress(OSError):  # fails while other attempts are still there: fine
        os.rmdir(root)
        os.rmdir(os.path.dirname(root))
    return len(staged)


def _delete_if_generation(fs: Any, path: str, info: dict[str, Any]) -> None:
    generation = info.get("generation")
    if generation is None or not hasattr(fs, "split_path"):
        fs.rm_file(path)
        return
    bucket, key, _ = fs.split_path(path)
    # Only the object we listed: if a new holder has republished it since, this delete fails (412).
    with contextlib.suppress(FileNotFoundError, FileExistsError):
        fs.call("DELETE", "b/{}/o/{}", bucket, key, ifGenerationMatch=generation)


def _publish_object_store(staging: str, output_path: str, fence: Fence) -> int:
    fs, sroot = filesystem(staging)
    _, oroot = filesystem(output_path)
    staged = {_rel(p, sroot): p for p in fs.find(sroot)}
    old = {
        _rel(p, oroot): (p, info)
        for p, info in fs.find(oroot, detail=True).items()
        if not _is_executor_entry(_rel(p, oroot).split("/", 1)[0])
    }
    for rel, (path, info) in old.items():
        if rel not in staged:
            fence.check()
            _delete_if_generation(fs, path, info)
    items = sorted(staged.items())
    for start in range(0, len(items), _COPY_BATCH):
        fence.check()
        batch = items[start : start + _COPY_BATCH]
        # Server-side copies (GCS rewrite), issued concurrently; each fails if its source was discarded.
        fs.copy([src for _, src in batch], [f"{oroot.rstrip('/')}/{rel}" for rel, _ in batch], on_error="raise")
    if staged:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(list(staged.values()))
    return len(staged)


def _staging_pattern(output_path: str) -> tuple[re.Pattern[str], str]:
    """A regex matching the staging folder of *any* attempt at ``output_path``, with or without
    the URL scheme (``gs://b/x/.marin_attempts/n/<id>/n`` and ``b/x/.marin_attempts/n/<id>/n``), and
    the stripped output path it maps to (the scheme, when present, is kept by the replacement)."""
    stripped_root = filesystem(attempts_root(output_path))[1].rstrip("/")
    stripped_output = filesystem(output_path)[1].rstrip("/")
    name = _split(output_path)[1]
    pattern = re.compile(
        r"(?P<scheme>[a-z][a-z0-9+.-]*://)?"
        + re.escape(stripped_root)
        + r"/[^/\s\"']+/"
        + re.escape(name)
        + r"(?![A-Za-z0-9._+=-])"  # the whole name: not "train-abc" inside "train-abc2"
    )
    return pattern, stripped_output


def relocate_text(text: str, output_path: str) -> str:
    """``text`` with every attempt's staging folder of ``output_path`` replaced by the output path."""
    if f"/{ATTEMPTS_DIR}/" not in text:
        return text
    pattern, stripped_output = _staging_pattern(output_path)
    return pattern.sub(lambda m: (m.group("scheme") or "") + stripped_output, text)


_ANY_STAGING = re.compile(r"/" + re.escape(ATTEMPTS_DIR) + r"/([^/\s\"']+)/[^/\s\"']+/\1(?![A-Za-z0-9._+=-])")


def relocate_any_staging(text: str) -> str:
    """``text`` with every staging folder of any output (``<parent>/.marin_attempts/<name>/<attempt>/<name>``)
    replaced by the output it publishes to (``<parent>/<name>``): for logs that mention many steps."""
    if f"/{ATTEMPTS_DIR}/" not in text:
        return text
    return _ANY_STAGING.sub(r"/\1", text)


def rewrite_paths(value: Any, staging: str, output_path: str) -> Any:
    """``value`` (JSON-like) with the staging folder (of any attempt at ``output_path``, ``staging``
    among them) replaced by the output path in every string."""
    del staging  # every attempt's folder is matched (an adopted attempt's paths included)
    if isinstance(value, str):
        return relocate_text(value, output_path)
    if isinstance(value, dict):
        return {k: rewrite_paths(v, "", output_path) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rewrite_paths(v, "", output_path) for v in value]
    return value


# Files whose text may name the staging folder and that are read back as text: summaries, stats,
# configs (Levanter's YAML, HF JSON), logs, tables. Binary files (checkpoint arrays, safetensors,
# compressed shards, models) are never opened; larger text files are left as written.
TEXT_SUFFIXES = (
    ".json", ".jsonl", ".yaml", ".yml", ".txt", ".log", ".md", ".csv", ".tsv", ".toml", ".cfg", ".ini",
)  # fmt: skip
RELOCATE_MAX_BYTES = 16 << 20


def _is_text_candidate(path: str, info: dict[str, Any]) -> bool:
    if info.get("type") == "directory" or info.get("islink"):
        return False
    size = info.get("size")
    return path.lower().endswith(TEXT_SUFFIXES) and size is not None and int(size) <= RELOCATE_MAX_BYTES


def relocate_staged_text(staging: str, output_path: str, fence: Fence) -> list[str]:
    """Rewrite the staged text files that name a staging folder so they name ``output_path``.

    Before publishing: the files a step (or a library it called -- Levanter's ``train_config.yaml``
    and ``train.log.config.yaml``, HF export configs, ``train_summary.json``,
    ``tokenize_stats.json``, eval results) wrote while its output path was the staging folder then
    name the folder they are published to. Cost: one listing, one read of each text file up to
    :data:`RELOCATE_MAX_BYTES` (by suffix, :data:`TEXT_SUFFIXES`) and one write of each that
    changed -- on object stores ``_COPY_BATCH`` requests at a time between two lease checks.
    Returns the rewritten paths (relative to ``staging``).
    """
    fs, sroot = filesystem(staging)
    try:
        found = fs.find(sroot, detail=True)
    except FileNotFoundError:
        return []
    candidates = sorted(p for p, info in found.items() if _is_text_candidate(p, info))
    changed: list[str] = []
    local = is_local(staging)
    for start in range(0, len(candidates), _COPY_BATCH):
        fence.check()
        batch = candidates[start : start + _COPY_BATCH]
        contents = fs.cat(batch, on_error="omit")  # concurrent on object stores
        updates: dict[str, bytes] = {}
        for path, data in contents.items():
            if f"/{ATTEMPTS_DIR}/".encode() not in data:
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            new = relocate_text(text, output_path)
            if new != text:
                updates[path] = new.encode("utf-8")
        if not updates:
            continue
        fence.check()
        if local:
            for path, data in updates.items():
                _replace_local_file(path, data)
        else:
            fs.pipe(updates)  # each object replaced whole: readers see the old or the new text
        changed.extend(_rel(p, sroot) for p in updates)
    return changed


def _replace_local_file(path: str, data: bytes) -> None:
    """Replace ``path`` atomically (a temporary file beside it, renamed over it), keeping its mode."""
    tmp = f"{path}.relocate-{uuid.uuid4().hex[:8]}"
    with open(tmp, "wb") as handle:
        handle.write(data)
    with contextlib.suppress(OSError):
        shutil.copymode(path, tmp)
    os.replace(tmp, path)
