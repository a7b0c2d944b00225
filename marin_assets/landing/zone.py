"""The landing zone of data drops (no Dagster here).

Layout: ``<prefix>/landing/<source>/<drop_id>/`` holding data files and ``manifest.json``::

    {"drop_id": "drop-004", "source": "sample-html", "created_at": "...",
     "files": [{"path": "part-00000.jsonl.gz", "bytes": 1234, "sha256": "..."}]}

A drop is *complete* only once ``manifest.json`` exists; uploaders write it last (atomically).
A complete drop is *valid* when its id is a safe path component, the manifest parses, every file
it lists is a plain relative name that exists with the listed size and sha256, and nothing in
the drop -- the drop folder itself, ``manifest.json``, any data file or sub-folder -- is a symlink
(a link could make the stages read outside the landing zone; links are rejected, never followed,
and a symlinked drop folder is reported, not skipped), and its folder tree is at most
:data:`MAX_DROP_DEPTH` deep and :data:`MAX_DROP_ENTRIES` large (walked without recursion). A drop
whose upload is still running -- a listed file shorter than the manifest says, or missing while the
uploader's hidden temporaries are there -- is *incomplete*, not rejected. Everything here reports problems as
values and never raises on a malformed drop, so one bad drop cannot block the others. What is not
a property of the drop -- a storage error while reading it, a bug in this code -- is raised, never
reported as ``rejected``: the sensor tick that met it fails visibly and the next tick retries, so a
bug or a brief outage never looks like bad data.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.step import validate_partition_key
from marin_assets.execution.storage import atomic_write_text, filesystem, join_path

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 10 * 1024 * 1024

_DIGITS = re.compile(r"(\d+)")

STATUS_VALID = "valid"
STATUS_INCOMPLETE = "incomplete"
STATUS_REJECTED = "rejected"
REJECTED_FILES = "rejected_files"
"""The raw step's metadata key: ``["<file>: <one-line reason>", ...]``, the files of a drop nothing could
be read of (the drops table shows them beside the processed drop)."""


@dataclass(frozen=True)
class DropStatus:
    """What the landing zone says about one drop folder."""

    source: str
    drop_id: str
    status: str  # valid | incomplete | rejected
    reason: str = ""
    path: str = ""
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def fingerprint(self) -> str:
        """A short hash of the manifest's file list (changes when the drop's content changes)."""
        files = self.manifest.get("files", []) if self.manifest else []
        return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def manifest_fingerprint(self) -> str:
        """A short hash of the whole manifest (changes whenever the manifest is rewritten differently)."""
        return manifest_fingerprint(self.manifest)


def manifest_fingerprint(manifest: dict[str, Any] | None) -> str:
    """A short hash of a parsed manifest (any field: files, created_at, ...)."""
    text = json.dumps(manifest or {}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def landing_root(prefix: str) -> str:
    """``<prefix>/landing``."""
    return join_path(prefix, "landing")


def source_dir(prefix: str, source: str) -> str:
    """``<prefix>/landing/<source>``: the folder holding one source's drops."""
    return join_path(landing_root(prefix), source)


def safe_drop_id(drop_id: str) -> str | None:
    """None when ``drop_id`` is safe as a partition key and path component, else the reason."""
    try:
        validate_partition_key(drop_id)
    except ValueError as exc:
        return str(exc)
    return None


def _safe_file_name(name: Any) -> bool:
    if not isinstance(name, str) or not name or len(name) > 512:
        return False
    parts = name.split("/")
    return all(p not in ("", ".", "..") and not any(ord(c) < 32 for c in p) for p in parts) and "\\" not in name


def _sha256_of(fs: Any, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _is_local(fs: Any) -> bool:
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocols


_NEVER_FOLLOWED = "; symlinks in a drop are never followed"
MAX_DROP_DEPTH = 64
"""A drop's folder tree may be this many levels deep (a deeper one is rejected whole, never walked
further: a hostile tree must not cost a tick its stack or its time)."""
MAX_DROP_ENTRIES = 200_000
"""A drop's folder tree may hold this many files and folders (a larger one is rejected whole)."""


def _walk_local(
    root: str, max_depth: int = MAX_DROP_DEPTH, max_entries: int = MAX_DROP_ENTRIES
) -> tuple[list[str], str | None]:
    """(relative paths of the files below the local folder ``root``, the first problem or None).

    Iterative (an explicit stack, never Python recursion: ``os.walk`` and fsspec's ``find`` raise
    ``RecursionError`` near 1,000 levels), bounded by ``max_depth`` and ``max_entries``, and it
    follows no link. A problem -- a symlink (the drop folder itself or anything below it), a tree
    too deep or too large -- stops the walk; its reason is one line naming the path.
    """
    if os.path.islink(root):
        return [], f"the drop folder itself is a symlink (-> {os.readlink(root)}){_NEVER_FOLLOWED}"
    files: list[str] = []
    entries = 0
    stack: list[tuple[str, int]] = [("", 0)]
    while stack:
        rel_dir, depth = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as scan:
                children = sorted(scan, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in children:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            entries += 1
            if entries > max_entries:
                return files, f"the drop holds more than {max_entries} files and folders (MAX_DROP_ENTRIES)"
            if entry.is_symlink():
                return files, f"{rel} is a symlink (-> {os.readlink(entry.path)}){_NEVER_FOLLOWED}"
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 >= max_depth:
                    shown = rel if len(rel) <= 120 else rel[:60] + "/.../" + rel[-40:]
                    return files, (
                        f"its folder tree is deeper than {max_depth} levels (MAX_DROP_DEPTH) at {shown}; not walked further"
                    )
                stack.append((rel, depth + 1))
            else:
                files.append(rel)
    return sorted(files), None


def tree_problem(drop_path: str) -> str | None:
    """Why a local drop folder's tree cannot be a drop -- a symlink in it (the folder itself or
    anything below it; never followed), a tree deeper than :data:`MAX_DROP_DEPTH` or larger than
    :data:`MAX_DROP_ENTRIES` -- or None.

    Object stores have no symlinks and no folder recursion (a listing is flat): None there.
    """
    fs, p = filesystem(drop_path)
    if not _is_local(fs):
        return None
    return _walk_local(p)[1]


def _listed_files(manifest: dict[str, Any] | None) -> list[str]:
    """The safe file names ``manifest`` lists, in its order."""
    names: list[str] = []
    for entry in (manifest or {}).get("files", []):
        name = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(name, str) and _safe_file_name(name):
            names.append(name)
    return names


def stat_signature(drop_path: str, manifest: dict[str, Any] | None) -> str:
    """A short hash of the manifest plus what the storage says of every file it lists, without
    reading them: size, mtime and ctime (local; ctime cannot be put back) or generation and the
    store's own checksum (object stores).

    Cheap (stats only): the landing sensor uses it to decide when a drop its checksums rejected is
    worth hashing again (an upload that was still running when the drop was first checked).
    """
    fs, p = filesystem(drop_path)
    stats: list[tuple[str, list[str] | None]] = []
    for name in _listed_files(manifest):
        try:
            info = fs.info(f"{p.rstrip('/')}/{name}")
        except (OSError, ValueError):
            stats.append((name, None))
            continue
        keys = ("size", "mtime", "created", "ino", "updated", "generation", "crc32c", "md5Hash", "ETag")
        stats.append((name, [str(info.get(k) or "") for k in keys]))
    text = json.dumps([manifest_fingerprint(manifest), stats], default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def content_fingerprint(drop_path: str, manifest: dict[str, Any] | None) -> str:
    """A short hash of the manifest plus the sha256 of the **content** of every file it lists
    (each streamed, never held whole).

    Changes when the manifest is rewritten or any byte of a listed file changes -- a same-size
    edit in place with its mtime put back included, which no stat can see. A missing or
    unreadable file counts as its own value (the drop is then not valid anyway). For a drop whose
    checksums verified, it equals :func:`expected_content_fingerprint` of its manifest.
    """
    fs, p = filesystem(drop_path)
    digests: list[tuple[str, str | None]] = []
    for name in _listed_files(manifest):
        try:
            digests.append((name, _sha256_of(fs, f"{p.rstrip('/')}/{name}")))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            digests.append((name, None))
    return _fingerprint_of(manifest, digests)


def expected_content_fingerprint(manifest: dict[str, Any] | None) -> str:
    """:func:`content_fingerprint` of a drop whose files hold what ``manifest`` says (no file read)."""
    sums = {
        entry.get("path"): entry.get("sha256") for entry in (manifest or {}).get("files", []) if isinstance(entry, dict)
    }
    digests = [
        (name, str(sums[name]).lower() if isinstance(sums.get(name), str) else None) for name in _listed_files(manifest)
    ]
    return _fingerprint_of(manifest, digests)


def _fingerprint_of(manifest: dict[str, Any] | None, digests: list[tuple[str, str | None]]) -> str:
    text = json.dumps([manifest_fingerprint(manifest), digests])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def read_manifest(drop_path: str) -> tuple[dict[str, Any] | None, str]:
    """The parsed manifest of a drop folder and "" -- or (None, reason).

    A storage error (``OSError``) is raised: it says nothing about the drop.
    """
    fs, p = filesystem(drop_path)
    mpath = f"{p.rstrip('/')}/{MANIFEST}"
    try:
        if not fs.exists(mpath):
            return None, "no manifest.json (drop incomplete)"
        size = fs.size(mpath)
        if size is not None and size > MAX_MANIFEST_BYTES:
            return None, f"manifest.json is {size} bytes (limit {MAX_MANIFEST_BYTES})"
        data = fs.cat_file(mpath)
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"manifest.json is not valid UTF-8 JSON: {exc}"
    except IsADirectoryError:
        return None, "manifest.json is a folder, not a file"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), list):
        return None, "manifest.json must be an object with a 'files' list"
    return manifest, ""


def validate_drop(drop_path: str, drop_id: str, verify_checksums: bool = True) -> tuple[str, str, dict[str, Any]]:
    """``(status, reason, manifest)`` of the drop folder ``drop_path`` named ``drop_id``.

    Raises:
        OSError: the storage failed while the drop was read (not a property of the drop: the
            caller retries; a drop is never rejected for it). Any other exception is a bug.
    """
    reason = safe_drop_id(drop_id)
    if reason:
        return STATUS_REJECTED, reason, {}
    problem = tree_problem(drop_path)
    if problem:
        return STATUS_REJECTED, problem, {}
    manifest, reason = read_manifest(drop_path)
    if manifest is None:
        status = STATUS_INCOMPLETE if reason.startswith("no manifest") else STATUS_REJECTED
        return status, reason, {}
    if manifest.get("drop_id", drop_id) != drop_id:
        return STATUS_REJECTED, f"manifest drop_id {manifest.get('drop_id')!r} != folder {drop_id!r}", manifest
    if not manifest["files"]:
        return STATUS_REJECTED, "manifest lists no files", manifest
    fs, p = filesystem(drop_path)
    seen: set[str] = set()
    for i, entry in enumerate(manifest["files"]):
        if not isinstance(entry, dict):
            return STATUS_REJECTED, f"manifest files[{i}] is not an object", manifest
        name = entry.get("path")
        if not _safe_file_name(name) or name == MANIFEST:
            return STATUS_REJECTED, f"manifest files[{i}] has an unsafe path {name!r}", manifest
        if name in seen:
            return STATUS_REJECTED, f"manifest lists {name!r} twice", manifest
        seen.add(name)
        fpath = f"{p.rstrip('/')}/{name}"
        if not fs.exists(fpath):
            if _has_upload_temporaries(fs, p):
                return STATUS_INCOMPLETE, f"upload in progress: {name} listed in manifest, not there yet", manifest
            return STATUS_REJECTED, f"{name}: listed in manifest but missing", manifest
        expected_size = entry.get("bytes")
        if expected_size is not None:
            actual = fs.size(fpath)
            if isinstance(actual, int) and isinstance(expected_size, int) and actual < expected_size:
                # Still growing (the manifest came first): waited for, never reported as rejected.
                return STATUS_INCOMPLETE, f"upload in progress: {name} has {actual} of {expected_size} bytes", manifest
            if actual != expected_size:
                return STATUS_REJECTED, f"{name}: size {actual} != manifest {expected_size}", manifest
        expected_sha = entry.get("sha256")
        if verify_checksums:
            if not isinstance(expected_sha, str):
                return STATUS_REJECTED, f"{name}: manifest has no sha256", manifest
            actual_sha = _sha256_of(fs, fpath)
            if actual_sha != expected_sha.lower():
                return (
                    STATUS_REJECTED,
                    f"{name}: sha256 {actual_sha[:12]}... != manifest {expected_sha[:12]}...",
                    manifest,
                )
    return STATUS_VALID, "", manifest


def _has_upload_temporaries(fs: Any, folder: str) -> bool:
    """True when the drop folder holds hidden (``.*`` / ``_*``) entries: an uploader's temporaries."""
    try:
        names = [entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(folder, detail=False)]
    except (FileNotFoundError, NotADirectoryError):
        return False
    return any(name.startswith((".", "_")) for name in names)


def list_drop_folders(path: str) -> list[tuple[str, str]]:
    """(name, full path) of the folders in a source's folder, from one fresh listing (never cached).

    Nothing inside a folder is read: a sensor skips the drops it processed at the cost of this one
    listing. Empty when the folder is missing; symlinks are listed too (see :func:`scan_source`).
    """
    return _child_dirs(path)


def _child_dirs(path: str) -> list[tuple[str, str]]:
    """(name, full path) of the folders directly below ``path`` (empty when missing).

    Symlinks are listed too (whatever they point at), so that a symlinked drop folder is
    reported as rejected instead of being invisible.
    """
    fs, p = filesystem(path)
    if _is_local(fs):
        # One readdir: the entry types come with it (fsspec's detailed listing stats every entry,
        # which dominated a tick at 10,000 drops).
        try:
            with os.scandir(p) as scan:
                names = [e.name for e in scan if e.is_symlink() or e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted((name, join_path(path, name)) for name in names)
    try:
        entries = fs.ls(p, detail=True)
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for entry in entries:
        if entry.get("type") != "directory" and not entry.get("islink"):
            continue
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        out.append((name, join_path(path, name)))
    return sorted(out)


def scan_landing_zone(prefix: str, source: str | None = None, verify_checksums: bool = True) -> list[DropStatus]:
    """Every drop folder below ``<prefix>/landing`` (or only ``source``'s), sorted by (source, drop).

    Never raises for malformed drops; a missing landing zone yields an empty list.
    """
    results: list[DropStatus] = []
    root = landing_root(prefix)
    sources = [(source, source_dir(prefix, source))] if source else _child_dirs(root)
    for src_name, src_path in sources:
        results.extend(scan_source(src_path, src_name, verify_checksums))
    return results


def scan_source(folder: str, source: str, verify_checksums: bool = True) -> list[DropStatus]:
    """Every drop folder of one source's folder (``<prefix>/landing/<source>``, or any path).

    Never raises for malformed drops; a missing folder yields an empty list.
    """
    if safe_drop_id(source):
        return [DropStatus(source, "", STATUS_REJECTED, f"unsafe source name {source!r}", folder)]
    results = []
    for drop_id, drop_path in _child_dirs(folder):
        if drop_id.startswith((".", "_")):
            continue  # temporary / hidden uploads
        status, reason, manifest = validate_drop(drop_path, drop_id, verify_checksums)
        results.append(DropStatus(source, drop_id, status, reason, drop_path, manifest))
    return results


def valid_drops(prefix: str, source: str, verify_checksums: bool = True) -> list[str]:
    """Sorted ids of the valid, complete drops of ``source``."""
    return sorted(
        (d.drop_id for d in scan_landing_zone(prefix, source, verify_checksums) if d.status == STATUS_VALID),
        key=drop_sort_key,
    )


@dataclass(frozen=True)
class LandingDrops:
    """A partition source: the valid drops (checksums verified) of one landing folder.

    The step that reads a landing zone declares it (``ExecutorStep(..., partitioned_by="web",
    partition_source=LandingDrops("landing/web"))``): the engine calls it with the prefix for the
    partition keys, and the code location watches the folder with a landing sensor of its own.

    Attributes:
        landing_dir: ``landing/<source>`` relative to the prefix (keeps versions prefix-independent),
            or an absolute path / URL.
    """

    landing_dir: str

    def __post_init__(self) -> None:
        if not isinstance(self.landing_dir, str) or not self.landing_dir.strip("/"):
            raise ValueError(f"LandingDrops needs a landing folder, got {self.landing_dir!r}")

    @property
    def source(self) -> str:
        """The source's name: the folder's last component (``landing/web`` -> ``web``)."""
        return self.landing_dir.rstrip("/").rsplit("/", 1)[-1]

    def folder(self, prefix: str) -> str:
        """The folder holding the drops, for the storage ``prefix``."""
        if "://" in self.landing_dir or self.landing_dir.startswith("/"):
            return self.landing_dir
        return join_path(prefix, self.landing_dir)

    def __call__(self, prefix: str) -> list[str]:
        return valid_drops_in(self.folder(prefix), verify_checksums=True)


def valid_drops_in(source_path: str, verify_checksums: bool = False) -> list[str]:
    """Sorted ids of the valid, complete drops in ``<prefix>/landing/<source>`` given directly."""
    out = []
    for drop_id, drop_path in _child_dirs(source_path):
        if (
            not drop_id.startswith((".", "_"))
            and validate_drop(drop_path, drop_id, verify_checksums)[0] == STATUS_VALID
        ):
            out.append(drop_id)
    return sorted(out, key=drop_sort_key)


def drop_sort_key(drop_id: str) -> tuple:
    """Order of drops: by id, with embedded numbers compared numerically (drop-9 < drop-10)."""
    return tuple(int(t) if t.isdigit() else t for t in _DIGITS.split(drop_id))


def write_manifest(drop_path: str, source: str | None = None) -> dict[str, Any]:
    """Make the files already in ``drop_path`` a complete drop: write its ``manifest.json`` last.

    Lists every file below the folder (hidden ``.*`` / ``_*`` names skipped), with size and sha256;
    raises ``ValueError`` naming a symlink (a drop never holds one) and when there is no file.
    The manifest is written atomically, so the sensor sees the drop complete or not at all.
    """
    fs, p = filesystem(drop_path)
    root = p.rstrip("/")
    if _is_local(fs):
        found, problem = _walk_local(root)
        if problem:
            raise ValueError(f"{drop_path}: {problem}")
    else:
        found = sorted(full[len(root) :].lstrip("/") for full in fs.find(root))
    files = []
    for rel in found:
        full = f"{root}/{rel}"
        if rel == MANIFEST or any(part.startswith((".", "_")) for part in rel.split("/")):
            continue
        if not _safe_file_name(rel):
            raise ValueError(f"{drop_path}: unsafe file name {rel!r}")
        files.append({"path": rel, "bytes": fs.size(full), "sha256": _sha256_of(fs, full)})
    if not files:
        raise ValueError(f"{drop_path}: no files to list in a manifest")
    drop_id = root.rsplit("/", 1)[-1]
    manifest: dict[str, Any] = {"drop_id": drop_id, "files": files}
    if source:
        manifest["source"] = source
    manifest["created_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_write_text(join_path(drop_path, MANIFEST), json.dumps(manifest, indent=2))
    return manifest


def main(argv: list[str] | None = None, prog: str = "python -m marin_assets.landing.zone") -> None:
    """``python -m marin_assets.landing.zone DROP_FOLDER``: write the folder's manifest (last).

    ``prog`` is the program its usage and errors name (``marin manifest`` passes its own)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Write manifest.json for the files of a drop folder (last).",
    )
    parser.add_argument("drop_folder", help="<prefix>/landing/<source>/<drop_id> holding the data files")
    args = parser.parse_args(argv)
    try:
        manifest = write_manifest(args.drop_folder)
    except (ValueError, OSError) as exc:  # unsafe name, symlink, no files, unreadable: one line, no traceback
        message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(exc))  # one line, whatever the name
        parser.exit(2, f"{parser.prog}: error: {message}; no manifest written\n")
    print(f"wrote {join_path(args.drop_folder, MANIFEST)} ({len(manifest['files'])} files)")


if __name__ == "__main__":
    main()
