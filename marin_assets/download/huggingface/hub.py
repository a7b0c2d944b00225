"""The Hugging Face hub, through ``huggingface_hub``'s own client: revisions, file transfers, a mirror.

Everything that fetches from the hub goes through here -- a dataset revision (``download_hf``), a
tokenizer by name (``resolve_tokenizer``), the data of an lm-eval task (``task_data``):

* **Where**: ``$HF_ENDPOINT`` (read when called, so a test or a mirror can set it late), else
  ``https://huggingface.co``; the request layer is ``huggingface_hub``'s (``HfApi.repo_info`` for a
  revision's commit and files, ``hf_hub_url`` + its HTTP session and headers for the bytes).
* **Offline**: ``HF_HUB_OFFLINE=1`` never touches the network: callers read the local Hugging Face
  cache as before (:func:`hub_offline`).
* **Unreachable**: :func:`check_reachable` opens a TCP connection to the hub first (seconds, not the
  client's minute of retries) and raises :class:`HubUnreachableError`, one line naming the host.
* **Transfers** (:func:`fetch_files`): parallel streams (one file each), straight into the
  destination (local folder or ``gs://``) through a temporary name (an upload committed only when complete),
  sha256 computed while copying and
  checked against the hub's LFS sha256 (git sha1 for small files); a dropped connection resumes with
  a ``Range`` request; a file finished by an earlier attempt is kept (its marker in ``.download/``),
  a local partial file resumes where it stopped. A progress line every few seconds (files, MB, MB/s).
* **Mirror** (:func:`hub_snapshot`): repositories fetched by name (tokenizers, eval datasets) are kept
  under ``$MARIN_HF_MIRROR`` (default ``<prefix>/hf``, the prefix being ``$MARIN_PREFIX`` or
  ``./data``) as ``<type>s/<repo>/<commit>/...`` with ``refs/<revision>`` written last; a later run
  reads them from there without the hub.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from marin_assets.execution.storage import filesystem, is_local, join_path, open_for_write

logger = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
MIRROR_ENV = "MARIN_HF_MIRROR"
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
DEFAULT_STREAMS = 8
PROGRESS_EVERY_S = 5.0
STATE_DIR = ".download"
_CHUNK = 256 << 10
_RETRIES = 4
_TRUE = ("1", "true", "yes", "on")


class HubUnreachableError(ConnectionError):
    """The hub's host does not accept connections (no network, wrong ``HF_ENDPOINT``, firewall)."""


class HubNotFoundError(FileNotFoundError):
    """The repository, revision or file does not exist on the hub (or is not visible to this token)."""


class HubTransferError(OSError):
    """A file's bytes did not arrive complete and intact after the retries."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of a hub revision: its path, size and the hash the hub publishes for it."""

    path: str
    size: int | None
    sha256: str | None = None
    git_sha1: str | None = None


def hub_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``, as ``huggingface_hub`` reads it) asks
    for no network -- read now, not at import."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().lower() in _TRUE


def _sync_client() -> None:
    """``huggingface_hub`` reads ``HF_HUB_OFFLINE`` once, at import: when the environment has since
    allowed the network (a test, a script that sets it late), let its client go online too."""
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    if constants.HF_HUB_OFFLINE and not hub_offline():
        constants.HF_HUB_OFFLINE = False
        reset_sessions()


def hub_endpoint() -> str:
    """``$HF_ENDPOINT`` or the public hub, without a trailing slash."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def endpoint_host(endpoint: str | None = None) -> str:
    """``host:port`` of the hub (what an unreachable-hub message names)."""
    parsed = urlparse(endpoint or hub_endpoint())
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.hostname}:{port}"


def check_reachable(what: str = "", endpoint: str | None = None, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`HubUnreachableError` (one line: host, what needed it, the ways out) unless a TCP
    connection to the hub opens within ``timeout_s``."""
    endpoint = endpoint or hub_endpoint()
    parsed = urlparse(endpoint)
    host = parsed.hostname or ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parsed.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        # Requests go through the proxy: a direct connection says nothing; check the proxy instead.
        proxied = urlparse(proxy if "://" in proxy else f"http://{proxy}")
        host, port = proxied.hostname or "", proxied.port or 80
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as exc:
        need = f" for {what}" if what else ""
        raise HubUnreachableError(
            f"Hugging Face hub {host}:{port} ({endpoint}) is unreachable{need}: {type(exc).__name__}: {exc} -- "
            "set HF_ENDPOINT to a reachable hub or mirror, or HF_HUB_OFFLINE=1 to read only the local "
            "Hugging Face cache"
        ) from None


def repo_type_of(prefix: str | None) -> str:
    """``dataset`` / ``model`` from Marin's ``hf_repo_type_prefix`` (``"datasets"``; ``""`` is a model)."""
    value = (prefix or "").strip("/").lower()
    if value in ("datasets", "dataset"):
        return "dataset"
    if value in ("spaces", "space"):
        return "space"
    return "model"


@contextlib.contextmanager
def online() -> Iterator[None]:
    """Let this process's hub client reach the hub inside the block, in a process that runs offline
    otherwise (the lm-eval subprocess: its model and tokenizer load with ``HF_HUB_OFFLINE=1``)."""
    from huggingface_hub import constants
    from huggingface_hub.utils import reset_sessions

    saved = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    was_offline = constants.HF_HUB_OFFLINE
    os.environ.update({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if was_offline != constants.HF_HUB_OFFLINE:
            constants.HF_HUB_OFFLINE = was_offline
            reset_sessions()


def _api():
    from huggingface_hub import HfApi

    _sync_client()
    return HfApi(endpoint=hub_endpoint())


def revision_files(repo_id: str, repo_type: str, revision: str | None) -> tuple[str, list[RemoteFile]]:
    """``(commit, files)`` of ``repo_id@revision`` from the hub (``HfApi.repo_info`` with blobs).

    Raises:
        HubNotFoundError: the repository or revision does not exist (one line).
    """
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = _api().repo_info(
            repo_id,
            repo_type=repo_type,
            revision=revision or None,
            files_metadata=True,
            timeout=READ_TIMEOUT_S,
        )
    except RevisionNotFoundError:
        raise HubNotFoundError(
            f"revision {revision!r} of {repo_type} {repo_id!r} does not exist on {hub_endpoint()}"
        ) from None
    except RepositoryNotFoundError:
        raise HubNotFoundError(
            f"{repo_type} {repo_id!r} does not exist on {hub_endpoint()} (or is private: set HF_TOKEN)"
        ) from None
    files = [
        RemoteFile(
            path=s.rfilename,
            size=s.size,
            sha256=s.lfs.sha256 if s.lfs is not None else None,
            git_sha1=s.blob_id if s.lfs is None else None,
        )
        for s in info.siblings or []
    ]
    return str(info.sha), files


def file_url(repo_id: str, repo_type: str, commit: str, path: str) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, path, repo_type=repo_type, revision=commit, endpoint=hub_endpoint())


# ------------------------------------------------------------------------------------------
# Transfers


class _Progress:
    """Counts bytes and files; a line every :data:`PROGRESS_EVERY_S` seconds and one at the end."""

    def __init__(self, label: str, files: int, total_bytes: int) -> None:
        self.label = label
        self.files = files
        self.total = total_bytes
        self.done_files = 0
        self.done_bytes = 0
        self.fetched_bytes = 0
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hub-progress", daemon=True)

    def add(self, nbytes: int, fetched: bool = True) -> None:
        with self._lock:
            self.done_bytes += nbytes
            if fetched:
                self.fetched_bytes += nbytes

    def file_done(self) -> None:
        with self._lock:
            self.done_files += 1

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-6)
        return (
            f"download {self.label}: {self.done_files}/{self.files} files, "
            f"{self.done_bytes / 1e6:.1f}/{self.total / 1e6:.1f} MB, {self.fetched_bytes / 1e6 / elapsed:.1f} MB/s"
        )

    def _loop(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY_S):
            _report(self.line())

    def __enter__(self) -> _Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _report(line: str) -> None:
    from marin_resources.progress import report_progress

    report_progress(line)


def _open_stream(url: str, offset: int):
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    _sync_client()
    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"  # the bytes as stored, so sizes and hashes match
    if offset:
        headers["Range"] = f"bytes={offset}-"
    response = get_session().get(url, headers=headers, stream=True, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
    hf_raise_for_status(response)
    if offset and response.status_code != 206:
        response.close()
        raise HubTransferError(f"{url}: the server ignored the Range request (status {response.status_code})")
    return response


def _git_sha1_prefix(size: int) -> Any:
    digest = hashlib.sha1()
    digest.update(b"blob %d\0" % size)
    return digest


class _Hashes:
    def __init__(self, size: int | None) -> None:
        self.sha256 = hashlib.sha256()
        self.git = _git_sha1_prefix(size) if size is not None else None
        self.count = 0

    def update(self, chunk: bytes) -> None:
        self.sha256.update(chunk)
        if self.git is not None:
            self.git.update(chunk)
        self.count += len(chunk)


def _pump(url: str, write: Callable[[bytes], None], hashes: _Hashes, progress: _Progress, name: str) -> None:
    """Copy ``url`` from byte ``hashes.count`` on into ``write``; a dropped connection resumes with
    ``Range`` (up to :data:`_RETRIES` times)."""
    import requests

    failures = 0
    while True:
        try:
            response = _open_stream(url, hashes.count)
            try:
                for chunk in response.iter_content(_CHUNK):
                    if chunk:
                        write(chunk)
                        hashes.update(chunk)
                        progress.add(len(chunk))
            finally:
                response.close()
            return
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            failures += 1
            if failures > _RETRIES:
                raise HubTransferError(f"{name}: the transfer broke off {failures} times; last: {exc}") from None
            logger.info("%s: connection dropped after %d bytes (%s); resuming", name, hashes.count, exc)
            time.sleep(min(0.5 * failures, 2.0))


def _verify(remote: RemoteFile, hashes: _Hashes, label: str) -> str:
    sha = hashes.sha256.hexdigest()
    if remote.size is not None and hashes.count != remote.size:
        raise HubTransferError(f"{label}: {remote.path}: got {hashes.count} bytes, the hub lists {remote.size}")
    if remote.sha256 and sha != remote.sha256:
        raise HubTransferError(f"{label}: {remote.path}: sha256 {sha} differs from the hub's {remote.sha256}")
    if not remote.sha256 and remote.git_sha1 and hashes.git is not None and hashes.git.hexdigest() != remote.git_sha1:
        raise HubTransferError(f"{label}: {remote.path}: content differs from the hub's blob {remote.git_sha1}")
    return sha


def _fetch_one(
    repo_id: str, repo_type: str, commit: str, remote: RemoteFile, dest: str, progress: _Progress, label: str
) -> dict:
    fs, root = filesystem(dest)
    target = f"{root.rstrip('/')}/{remote.path}"
    marker = f"{root.rstrip('/')}/{STATE_DIR}/done/{remote.path}.json"
    if fs.exists(marker) and fs.exists(target):
        with fs.open(marker, "r") as handle:
            entry = json.load(handle)
        if entry.get("commit") == commit and fs.size(target) == entry["bytes"]:
            progress.add(entry["bytes"], fetched=False)
            progress.file_done()
            return {"path": remote.path, "bytes": entry["bytes"], "sha256": entry["sha256"]}
    url = file_url(repo_id, repo_type, commit, remote.path)
    parent = target.rsplit("/", 1)[0]
    fs.makedirs(parent, exist_ok=True)
    hashes = _Hashes(remote.size)
    if is_local(dest):
        partial = f"{root.rstrip('/')}/{STATE_DIR}/partial/{remote.path}"
        os.makedirs(os.path.dirname(partial), exist_ok=True)
        if os.path.exists(partial):  # an earlier attempt's bytes: hash them, go on from there
            with open(partial, "rb") as handle:
                for chunk in iter(lambda: handle.read(_CHUNK), b""):
                    hashes.update(chunk)
            if remote.size is not None and hashes.count > remote.size:
                os.remove(partial)
                hashes = _Hashes(remote.size)
            else:
                progress.add(hashes.count, fetched=False)
        with open(partial, "ab") as out:
            if hashes.count != (remote.size if remote.size is not None else -1):
                _pump(url, out.write, hashes, progress, f"{label}: {remote.path}")
        sha = _verify(remote, hashes, label)
        os.replace(partial, target)
    else:
        # An object store commits an upload when it closes: a failed or corrupt transfer is
        # discarded, never visible (no temporary object to copy and delete).
        with open_for_write(join_path(dest, remote.path)) as out:
            _pump(url, out.write, hashes, progress, f"{label}: {remote.path}")
            sha = _verify(remote, hashes, label)
    entry = {"path": remote.path, "bytes": hashes.count, "sha256": sha}
    fs.makedirs(marker.rsplit("/", 1)[0], exist_ok=True)
    with fs.open(marker, "w") as handle:
        json.dump({**entry, "commit": commit}, handle)
    progress.file_done()
    return entry


def fetch_files(
    repo_id: str,
    repo_type: str,
    commit: str,
    files: Sequence[RemoteFile],
    dest: str,
    streams: int = DEFAULT_STREAMS,
    label: str | None = None,
) -> list[dict]:
    """Fetch ``files`` of ``repo_id@commit`` into ``dest`` (same relative paths), ``streams`` at once.

    Returns ``[{"path", "bytes", "sha256"}]`` in the order of ``files``; ``dest/.download/`` (resume
    state) is removed once every file is in place.
    """
    label = label or f"{repo_id}@{commit[:10]}"
    total = sum(f.size or 0 for f in files)
    with _Progress(label, len(files), total) as progress:
        workers = max(1, min(streams, len(files) or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hub-fetch") as pool:
            futures = [
                pool.submit(_fetch_one, repo_id, repo_type, commit, remote, dest, progress, label) for remote in files
            ]
            entries = [future.result() for future in futures]
    _report(progress.line() + f" in {time.monotonic() - progress.start:.1f} s")
    fs, root = filesystem(dest)
    state = f"{root.rstrip('/')}/{STATE_DIR}"
    if fs.exists(state):
        fs.rm(state, recursive=True)
    return entries


# ------------------------------------------------------------------------------------------
# The mirror of repositories fetched by name


def mirror_root() -> str:
    """``$MARIN_HF_MIRROR``, else ``<prefix>/hf`` (prefix: ``$MARIN_PREFIX`` or ``./data``)."""
    if os.environ.get(MIRROR_ENV):
        return os.environ[MIRROR_ENV]
    from marin_resources.storage import default_prefix

    return join_path(default_prefix(), "hf")


def _repo_folder(repo_id: str, repo_type: str) -> str:
    return join_path(mirror_root(), f"{repo_type}s/{repo_id}")


def mirrored(repo_id: str, repo_type: str, revision: str) -> str | None:
    """The mirror's complete copy of ``repo_id@revision`` (a folder), or None."""
    folder = _repo_folder(repo_id, repo_type)
    fs, _ = filesystem(folder)
    ref = join_path(folder, f"refs/{revision}")
    if not fs.exists(ref):
        return None
    with fs.open(ref, "r") as handle:
        commit = handle.read().strip()
    return join_path(folder, commit)


def _matches(path: str, patterns: Sequence[str] | None) -> bool:
    import fnmatch

    return not patterns or any(fnmatch.fnmatch(path, p) for p in patterns)


def hub_snapshot(
    repo_id: str, repo_type: str, revision: str = "main", allow_patterns: Sequence[str] | None = None, what: str = ""
) -> str:
    """A folder holding ``repo_id@revision`` (the files matching ``allow_patterns``) fetched from the
    hub into the mirror, or the mirror's copy when there is one.

    The caller handles ``HF_HUB_OFFLINE`` (the local cache) itself; this always may use the network.
    Raises :class:`HubUnreachableError` or :class:`HubNotFoundError` (one line each).
    """
    found = mirrored(repo_id, repo_type, revision)
    if found is not None:
        return found
    what = what or f"{repo_type} {repo_id!r}"
    check_reachable(what)
    commit, files = revision_files(repo_id, repo_type, revision)
    wanted = [f for f in files if _matches(f.path, allow_patterns)]
    if not wanted:
        raise HubNotFoundError(
            f"{what}: {repo_id}@{revision} on {hub_endpoint()} has no files matching {allow_patterns}"
        )
    folder = _repo_folder(repo_id, repo_type)
    fetch_files(repo_id, repo_type, commit, wanted, join_path(folder, commit), label=f"{repo_id}@{revision}")
    fs, _ = filesystem(folder)
    for ref in {revision, commit}:  # written last: the copy is complete
        path = join_path(folder, f"refs/{ref}")
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(path, "w") as handle:
            handle.write(commit)
    logger.info(
        "fetched %s (%s@%s, commit %s) into %s", what, repo_id, revision, commit[:10], join_path(folder, commit)
    )
    return join_path(folder, commit)
