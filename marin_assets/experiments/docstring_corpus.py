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
# parsing at once fail with "SystemError: AST constructor recursion depth mismatch". Our own parses
# (two steps of one run building corpora) take turns; other code parses too -- Python 3.11 parses a
# source segment to draw the carets of every traceback it formats, in whichever thread logs an
# error -- so a parse that lost that race is simply repeated (the state is reset at each parse).
_PARSE_LOCK = threading.Lock()
_PARSE_ATTEMPTS = 5
_DEPTH_MISMATCH = "recursion depth mismatch"


def parse_source(source: str) -> ast.Module:
    """``ast.parse(source)``, safe beside other threads' parses (see ``_PARSE_LOCK``)."""
    for _ in range(_PARSE_ATTEMPTS - 1):
        try:
            with _PARSE_LOCK:
                return ast.parse(source)
        except SystemError as exc:
            if _DEPTH_MISMATCH not in str(exc):
                raise
    with _PARSE_LOCK:
        return ast.parse(source)


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
            tree = parse_source(source)
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, _DOCUMENTED):
                doc = ast.get_docstring(node, clean=True)
                if doc:
                    yield doc
