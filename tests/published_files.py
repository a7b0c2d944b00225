"""What a researcher inspects after a run: published files that still name a staging folder."""

from __future__ import annotations

from pathlib import Path

from marin_assets.execution.attempt import ATTEMPTS_DIR


def files_naming_a_staging_folder(root: str | Path) -> list[str]:
    """Every file under ``root`` (outside the attempts folders) that is text -- UTF-8 without NUL
    bytes, whatever its name -- and contains ``.marin_attempts``; relative paths, sorted."""
    root = Path(root)
    found = []
    for path in root.rglob("*"):
        if not path.is_file() or path.is_symlink() or ATTEMPTS_DIR in path.relative_to(root).parts:
            continue
        data = path.read_bytes()
        if b"\x00" in data[:8192]:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if ATTEMPTS_DIR in text:
            found.append(str(path.relative_to(root)))
    return sorted(found)
