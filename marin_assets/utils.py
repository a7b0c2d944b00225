"""Marin's ``marin.utils``: ``is_in_ci`` and the fsspec helpers Marin's stages and scripts import.

Every helper takes local paths and URLs (``gs://``, ``memory://``) alike and never uses
``os.path`` on a maybe-remote path.
"""

from __future__ import annotations

import os

from marin_assets.execution.storage import filesystem, join_path

_CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "BUILDKITE", "GITLAB_CI")


def is_in_ci() -> bool:
    """True when running under a CI system (``$CI`` or a CI-specific variable is set and not false)."""
    return any(os.environ.get(name, "").lower() not in ("", "0", "false") for name in _CI_VARIABLES)


def _with_protocol(example: str, fs_path: str) -> str:
    """``fs_path`` (as the filesystem names it) with the scheme of ``example`` put back."""
    if "://" in example and "://" not in fs_path:
        return f"{example.split('://', 1)[0]}://{fs_path}"
    return fs_path


def fsspec_glob(file_path: str) -> list[str]:
    """Sorted paths matching the glob ``file_path`` (``**`` recurses), same scheme as the pattern."""
    fs, pattern = filesystem(file_path)
    return sorted(_with_protocol(file_path, p) for p in fs.glob(pattern))


def fsspec_exists(file_path: str) -> bool:
    """True when ``file_path`` exists."""
    fs, p = filesystem(file_path)
    return bool(fs.exists(p))


def fsspec_isdir(dir_path: str) -> bool:
    """True when ``dir_path`` is a directory (or a prefix with objects below it)."""
    fs, p = filesystem(dir_path)
    return bool(fs.isdir(p))


def fsspec_mkdirs(dir_path: str, exist_ok: bool = True) -> None:
    """Create ``dir_path`` and its parents (a no-op on object stores)."""
    fs, p = filesystem(dir_path)
    fs.makedirs(p, exist_ok=exist_ok)


def fsspec_rm(file_path: str) -> bool:
    """Remove ``file_path`` (recursively); False when it did not exist."""
    fs, p = filesystem(file_path)
    if not fs.exists(p):
        return False
    fs.rm(p, recursive=True)
    return True


def fsspec_get_curr_subdirectories(dir_path: str) -> list[str]:
    """The direct subdirectories of ``dir_path`` (sorted, same scheme as ``dir_path``)."""
    fs, p = filesystem(dir_path)
    if not fs.exists(p):
        return []
    return sorted(_with_protocol(dir_path, e["name"]) for e in fs.ls(p, detail=True) if e["type"] == "directory")


def fsspec_get_atomic_directories(dir_path: str) -> list[str]:
    """Every directory at or below ``dir_path`` that has no subdirectory (sorted, same scheme)."""
    children = fsspec_get_curr_subdirectories(dir_path)
    if not children:
        return [dir_path.rstrip("/")] if fsspec_isdir(dir_path) else []
    leaves: list[str] = []
    for child in children:
        leaves.extend(fsspec_get_atomic_directories(child))
    return sorted(leaves)


def fsspec_cpdir(dir_path: str, target_path: str) -> None:
    """Copy every file below ``dir_path`` to the same relative path below ``target_path`` (same store)."""
    fs, source = filesystem(dir_path)
    _, target = filesystem(target_path)
    base = source.rstrip("/") + "/"
    for path in fs.find(source):
        rel = path[len(base) :] if path.startswith(base) else os.path.basename(path)
        destination = join_path(target, rel)
        fs.makedirs(destination.rsplit("/", 1)[0], exist_ok=True)
        fs.copy(path, destination)


def fsspec_size(file_path: str) -> int:
    """Total bytes of ``file_path`` (a file, or every file below a directory)."""
    fs, p = filesystem(file_path)
    return int(fs.du(p, total=True))


def rebase_file_path(
    base_in_path: str,
    file_path: str,
    base_out_path: str,
    new_extension: str | None = None,
    old_extension: str | None = None,
) -> str:
    """``file_path`` moved from below ``base_in_path`` to the same relative path below ``base_out_path``.

    With ``new_extension``, the ``old_extension`` (default: everything after the first dot of the
    file name) is replaced by it, as in Marin.

    Raises:
        ValueError: ``file_path`` does not lie below ``base_in_path``.
    """
    base = base_in_path.rstrip("/") + "/"
    if not file_path.startswith(base):
        raise ValueError(f"{file_path} is not below {base_in_path}")
    rel = file_path[len(base) :]
    if new_extension is not None:
        if old_extension is not None:
            if not rel.endswith(old_extension):
                raise ValueError(f"{file_path} does not end with {old_extension}")
            rel = rel[: -len(old_extension)] + new_extension
        else:
            head, _, name = rel.rpartition("/")
            name = name.split(".", 1)[0] + new_extension
            rel = f"{head}/{name}" if head else name
    return join_path(base_out_path, rel)


def get_directory_friendly_name(name: str) -> str:
    """A Hugging Face repo name as a folder name (Marin's rule: ``/`` -> ``--``, ``.`` and ``#`` -> ``-``)."""
    return name.replace("/", "--").replace(".", "-").replace("#", "-")
