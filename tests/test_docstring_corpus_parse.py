"""The demo corpora's parser survives CPython 3.11's interpreter-wide AST depth race.

Python 3.11 keeps the AST constructor's recursion depth in one interpreter-wide place, so a parse in
another thread (Python itself parses a source segment to draw a traceback's carets) can make ours
fail with ``SystemError: AST constructor recursion depth mismatch``; the state is reset at every
parse, so the parse is repeated. Any other error is not hidden.
"""

from __future__ import annotations

import ast

import pytest

from marin_assets.experiments import docstring_corpus


def _flaky_parse(failures: int, message: str):
    real, calls = ast.parse, []

    def parse(source: str) -> ast.Module:
        calls.append(source)
        if len(calls) <= failures:
            raise SystemError(message)
        return real(source)

    return parse, calls


def test_a_parse_that_lost_the_depth_race_is_repeated(monkeypatch):
    parse, calls = _flaky_parse(2, "AST constructor recursion depth mismatch (before=12, after=40)")
    monkeypatch.setattr(docstring_corpus.ast, "parse", parse)
    tree = docstring_corpus.parse_source('"""Doc."""\n')
    assert ast.get_docstring(tree) == "Doc." and len(calls) == 3


def test_other_system_errors_and_a_race_lost_every_time_are_raised(monkeypatch):
    parse, calls = _flaky_parse(1, "something else broke")
    monkeypatch.setattr(docstring_corpus.ast, "parse", parse)
    with pytest.raises(SystemError, match="something else"):
        docstring_corpus.parse_source("x = 1\n")
    assert len(calls) == 1
    parse, calls = _flaky_parse(100, "AST constructor recursion depth mismatch (before=1, after=2)")
    monkeypatch.setattr(docstring_corpus.ast, "parse", parse)
    with pytest.raises(SystemError, match="depth mismatch"):
        docstring_corpus.parse_source("x = 1\n")
    assert len(calls) == docstring_corpus._PARSE_ATTEMPTS
