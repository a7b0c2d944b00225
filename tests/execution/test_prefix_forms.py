"""Prefix spellings at startup: a store without conditional writes is refused once, with one clear
line, before anything touches it (its fsspec driver need not even be installed); a ``file://``
prefix is the local folder it names."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from marin_assets.execution import executor_main
from marin_assets.execution.conditional import UnsupportedStorageError, backend_for
from tests.execution.sample_steps import diamond


@pytest.mark.parametrize("prefix", ["s3://bucket/marin", "hdfs://namenode/marin", "ftp://host/marin"])
def test_a_store_without_conditional_writes_is_refused_at_startup(prefix, caplog, tmp_path):
    with pytest.raises(UnsupportedStorageError, match="conditional writes"):
        backend_for(f"{prefix}/step-abc/.executor_lease")
    for extra in ([], ["--dry_run", "true"]):
        caplog.clear()
        with caplog.at_level(logging.ERROR), pytest.raises(SystemExit) as exit_info:
            executor_main(diamond(), argv=["--prefix", prefix, "--no_record", *extra])
        assert exit_info.value.code == 2
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and prefix.split("://")[0] + "://" in errors[0] and "gs://" in errors[0], errors


def test_a_file_url_prefix_is_the_local_folder(tmp_path):
    folder = tmp_path / "out"
    report = executor_main(diamond(), argv=["--prefix", f"file://{folder}", "--no_record"])
    assert len(report.by_action("ran")) == 4
    statuses = {
        p.parent.name.rsplit("-", 1)[0]: json.loads(p.read_text())["status"] for p in folder.rglob(".executor_status")
    }
    assert statuses == {"a": "SUCCESS", "b": "SUCCESS", "c": "SUCCESS", "d": "SUCCESS"}
    again = executor_main(diamond(), argv=["--prefix", str(folder), "--no_record"])
    assert len(again.by_action("cached")) == 4  # the same outputs as the plain path
    assert not Path("file:").exists()


def test_marins_executor_takes_a_file_url_prefix(tmp_path):
    from marin_assets.execution.executor import Executor

    folder = tmp_path / "out"
    report = Executor(prefix=f"file://{folder}").run(diamond())
    assert len(report.by_action("ran")) == 4 and len(list(folder.rglob(".executor_status"))) == 4
