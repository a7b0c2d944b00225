"""The offline text of the demo corpora: docstrings of Python source files, read with ``ast``.

No module is imported, so reading is safe and the text is identical on every machine with the same
Python minor version. Two corpora are built from it: the stdlib-docstring documents
(:mod:`marin_assets.experiments.sample_documents`) and the sentences of the sample HTML drops
(:mod:`marin_assets.experiments.sample_data`).
"""

from __future__ import annotations

import ast
import os
import sysconfig
import threading
from collections.abc import Iterable, Iterator

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# CPython 3.11's AST constructor keeps its recursion depth in interpreter-wide state: two threads
# parsing at once (two steps of one run building corpora concurrently) fail with "SystemError: AST
# constructor recursion depth mismatch". One parse at a time in this process.
_PARSE_LOCK = threading.Lock()


def stdlib_dir() -> str:
    """This interpreter's standard-library source folder."""
    return sysconfig.get_paths()["stdlib"]


def python_files(root: str, skip_dirs: Iterable[str] = ()) -> list[str]:
    """The ``.py`` files below the local folder ``root`` in a fixed order (folders and files sorted),
    leaving out folders named in ``skip_dirs`` (tests, ``site-packages``: what is installed varies)."""
    skip = set(skip_dirs)
    files: list[str] = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return files


def iter_docstrings(paths: Iterable[str]) -> Iterator[str]:
    """Docstrings (cleaned, as ``ast.get_docstring`` gives them) of every module, class and function
    of the local source files ``paths``, file by file in ``ast.walk`` order; a file that cannot be
    read or parsed is skipped."""
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:  # local source files, never a remote path
                source = handle.read()
            with _PARSE_LOCK:
                tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, _DOCUMENTED):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    yield doc
