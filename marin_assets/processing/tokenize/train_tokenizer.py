"""The tokenizer as a step: a byte-level BPE trained with HF ``tokenizers`` on documents.

Nothing can be downloaded, so the tokenizer is itself an asset. The saved directory is a standard
``transformers`` fast tokenizer (``tokenizer.json`` + ``tokenizer_config.json`` +
``special_tokens_map.json``), loadable with ``AutoTokenizer.from_pretrained(path)`` and therefore
by Levanter (``data.tokenizer: <path>``) and lm-eval's ``hf`` model.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from marin_assets.core.documents import iter_texts, list_document_files
from marin_assets.execution.step import ExecutorStep, InputName, StepPath, this_output_path, versioned
from marin_assets.execution.storage import filesystem, is_local

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
PAD = "<|pad|>"
UNK = "<|unk|>"
DEFAULT_SPECIAL_TOKENS = (BOS, EOS, PAD, UNK)


@dataclass(frozen=True)
class TokenizerConfig:
    """Config of :func:`train_tokenizer`.

    Attributes:
        input_paths: document directories or files (jsonl/jsonl.gz with ``text``); a list is fine.
        output_path: the tokenizer directory.
        vocab_size: BPE vocabulary size, special tokens included.
        special_tokens: the first four are used as bos, eos, pad, unk.
        min_frequency: minimum pair frequency for a merge.
        max_documents: train on at most this many documents (None: all) -- BPE quality saturates
            early, and this bounds time and memory on big inputs.
        model_max_length: written to the tokenizer config (lm-eval reads it to truncate).
    """

    input_paths: Sequence[StepPath] | StepPath
    output_path: StepPath
    vocab_size: int = 4096
    special_tokens: tuple[str, ...] = DEFAULT_SPECIAL_TOKENS
    min_frequency: int = 2
    max_documents: int | None = 200_000
    model_max_length: int = 2048
    text_field: str = "text"
    extra: dict = field(default_factory=dict)


def build_fast_tokenizer(
    texts, vocab_size: int, special_tokens: Sequence[str], min_frequency: int = 2, model_max_length: int = 2048
):
    """Train a byte-level BPE on ``texts`` and wrap it as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if len(special_tokens) < 4:
        raise ValueError("special_tokens needs at least bos, eos, pad, unk")
    bos, eos, pad, unk = special_tokens[:4]
    tok = Tokenizer(models.BPE(unk_token=None))
    # add_prefix_space=False: text is tokenized as-is, like GPT-2/Llama-3 byte-level BPEs.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        unk_token=unk,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


def train_tokenizer(config: TokenizerConfig) -> dict:
    """Train the tokenizer and save it to ``config.output_path``; returns step metadata.

    The directory is written into a temporary folder and then copied, with ``tokenizer.json`` last
    (it is what loaders open), so a crash mid-way never leaves a loadable half-written tokenizer;
    a rerun simply overwrites.
    """
    files = list_document_files(config.input_paths)
    if not files:
        raise FileNotFoundError(f"no jsonl documents under {config.input_paths}")
    start = time.monotonic()
    counts = {"documents": 0, "bytes": 0}

    def texts():
        for text in iter_texts(files, config.text_field):
            if config.max_documents is not None and counts["documents"] >= config.max_documents:
                return
            counts["documents"] += 1
            counts["bytes"] += len(text.encode("utf-8"))
            yield text

    tokenizer = build_fast_tokenizer(
        texts(), config.vocab_size, config.special_tokens, config.min_frequency, config.model_max_length
    )
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer.save_pretrained(tmp)
        names = sorted(os.listdir(tmp), key=lambda n: n == "tokenizer.json")
        if is_local(config.output_path):
            os.makedirs(config.output_path, exist_ok=True)
            for name in names:
                shutil.copyfile(os.path.join(tmp, name), os.path.join(config.output_path, name + ".tmp"))
                os.replace(os.path.join(config.output_path, name + ".tmp"), os.path.join(config.output_path, name))
        else:
            fs, p = filesystem(config.output_path)
            for name in names:
                fs.put_file(os.path.join(tmp, name), f"{p.rstrip('/')}/{name}")
    sample = "Return the number of items in the sequence."
    return {
        "vocab_size": len(tokenizer),
        "documents": counts["documents"],
        "bytes": counts["bytes"],
        "seconds": round(time.monotonic() - start, 2),
        "sample_tokens": len(tokenizer(sample)["input_ids"]),
        "bytes_per_token_sample": round(len(sample) / max(1, len(tokenizer(sample)["input_ids"])), 3),
        "path": config.output_path,
    }


def default_tokenizer(
    name: str,
    documents: ExecutorStep | InputName | str | Sequence[ExecutorStep | InputName | str],
    vocab_size: int = 4096,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
    max_documents: int | None = 200_000,
) -> ExecutorStep:
    """A step ``tokenizers/<name>`` training a byte-level BPE on ``documents``.

    ``vocab_size`` and ``special_tokens`` are versioned: changing them gives a new tokenizer path
    (and so new caches and checkpoints downstream).
    """
    if isinstance(documents, str):
        documents = InputName.hardcoded(documents)
    inputs = list(documents) if isinstance(documents, (list, tuple)) else [documents]
    inputs = [InputName.hardcoded(p) if isinstance(p, str) else p for p in inputs]
    return ExecutorStep(
        name=f"tokenizers/{name}",
        fn=train_tokenizer,
        config=TokenizerConfig(
            input_paths=inputs,
            output_path=this_output_path(),
            vocab_size=versioned(vocab_size),
            special_tokens=versioned(tuple(special_tokens)),
            max_documents=versioned(max_documents),
        ),
        description=f"Byte-level BPE tokenizer (vocab {vocab_size}) trained on the documents.",
        pip_dependency_groups=["tokenize"],
    )
