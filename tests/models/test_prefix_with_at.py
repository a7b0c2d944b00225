"""A prefix may hold ``@``: the paths handed to Levanter (reference checkpoint, tokenizer, an HF folder to
start from) are never read as ``<path>@<revision>``. Levanter's own converter is used on a tiny HF model saved
under a folder with ``@`` in its name (the failure the issue saw at every training step's HF export)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def at_folder(tmp_path):
    from tests.generation.tiny_lm import build_tiny_lm

    return build_tiny_lm(tmp_path / "team@lab" / "prefix" / "hf", ["a small corpus of words"] * 8)


def test_levanter_reads_a_reference_under_a_prefix_with_at(at_folder):
    from levanter.compat.hf_checkpoints import HFCheckpointConverter, RepoRef
    from levanter.models.llama import LlamaConfig

    from marin_assets.training.levanter_config import revision_free, use_local_reference

    raw = str(at_folder)
    assert RepoRef.from_string(raw).revision is not None  # what Levanter does to such a path

    model = use_local_reference(LlamaConfig(), raw, raw)
    assert "@" not in model.reference_checkpoint and "@" not in model.tokenizer
    assert os.path.samefile(model.reference_checkpoint, raw)
    converter = HFCheckpointConverter(
        LlamaConfig, reference_checkpoint=model.reference_checkpoint, tokenizer=model.tokenizer
    )
    assert converter.default_hf_config.vocab_size == len(converter.tokenizer)
    assert revision_free(raw) == model.reference_checkpoint  # the same alias every time
    assert revision_free("/plain/path") == "/plain/path"


def test_a_temp_dir_with_at_fails_early_in_one_line(at_folder, monkeypatch, tmp_path):
    import tempfile

    from marin_assets.training.levanter_config import revision_free

    bad = tmp_path / "tmp@dir"
    bad.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(bad))
    with pytest.raises(ValueError, match="set TMPDIR to a folder without '@'"):
        revision_free(str(at_folder))
