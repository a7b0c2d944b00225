"""The model half of the quickstart: documents -> tokenizer -> tokenized cache -> tiny model -> eval.

``quickstart_model_steps(documents, ...)`` builds the tokenizer, cache, training and evaluation
steps: ``marin_assets.experiments.quickstart`` feeds it the curated documents of every drop (a
tokenizer trained on one reference drop, a separate held-out cache); without ``documents`` it uses
the offline stdlib-docstring sample
(:func:`marin_assets.experiments.sample_documents.sample_documents_step`), as the model tests and
``bench/train.py`` do. Two sizes:

* ``"tiny"``: the README quickstart -- 4096-token BPE, 0.66 M-parameter Llama, 100 steps x 32 x 128
  tokens; the train loss falls from about 8.9 to about 5.4 and the held-out loss to about 6.5 in
  about a minute of training on 2 CPU cores. (200 steps, as before, reached a held-out loss of 6.45
  against 6.48 at step 100: the second half mostly memorises the ~0.2 M training tokens.)
* ``"test"``: the same graph shrunk for the test suite (a few steps, a few eval instances).
"""

from __future__ import annotations

from dataclasses import dataclass

from marin_assets.execution.step import ExecutorStep, InputName, versioned
from marin_assets.experiments.defaults import default_tokenize, default_train
from marin_assets.experiments.evals import default_eval
from marin_assets.experiments.evals.task_configs import LOCAL_TASKS
from marin_assets.experiments.sample_documents import sample_documents_step
from marin_assets.experiments.simple_train_config import SimpleTrainConfig
from marin_assets.processing.tokenize.train_tokenizer import default_tokenizer
from marin_assets.training.train_config import LlamaModelConfig
from marin_resources.resource_config import CpuOnlyConfig


@dataclass(frozen=True)
class QuickstartSize:
    """Everything that differs between the quickstart sizes."""

    vocab_size: int
    model: LlamaModelConfig
    train: SimpleTrainConfig
    max_eval_instances: int | None
    max_eval_batches: int | None
    sample_bytes: int


def _train_config(
    batch: int, steps: int, learning_rate: float, every: int, max_eval_batches: int, checkpoint: int | None = None
) -> SimpleTrainConfig:
    """The quickstart's training settings; what changes the result is versioned (enters the step hash)."""
    return SimpleTrainConfig(
        resources=CpuOnlyConfig(num_cpus=1),
        train_batch_size=versioned(batch),
        num_train_steps=versioned(steps),
        learning_rate=versioned(learning_rate),
        weight_decay=versioned(0.0),
        warmup=versioned(0.05),
        min_lr_ratio=versioned(0.1),
        lr_schedule=versioned("cosine"),
        steps_per_eval=every,
        steps_per_export=checkpoint or every,
        steps_per_hf_export=steps,
        max_eval_batches=max_eval_batches,
    )


SIZES: dict[str, QuickstartSize] = {
    "tiny": QuickstartSize(
        vocab_size=4096,
        model=LlamaModelConfig(
            seq_len=128, hidden_dim=64, intermediate_dim=256, num_layers=2, num_heads=4, num_kv_heads=4
        ),
        train=_train_config(batch=32, steps=100, learning_rate=3e-3, every=50, max_eval_batches=8),
        max_eval_instances=None,
        max_eval_batches=None,
        sample_bytes=4_000_000,
    ),
    "test": QuickstartSize(
        vocab_size=1024,
        model=LlamaModelConfig(
            seq_len=64, hidden_dim=32, intermediate_dim=64, num_layers=1, num_heads=2, num_kv_heads=2
        ),
        train=_train_config(batch=16, steps=24, learning_rate=1e-2, every=12, max_eval_batches=2, checkpoint=10),
        max_eval_instances=8,
        max_eval_batches=2,
        sample_bytes=400_000,
    ),
}


def quickstart_model_steps(
    documents: ExecutorStep | InputName | str | None = None,
    validation_documents: ExecutorStep | InputName | str | None = None,
    size: str = "tiny",
    name: str = "quickstart",
    *,
    tokenizer_documents: ExecutorStep | InputName | str | None = None,
    heldout_documents: ExecutorStep | InputName | str | None = None,
) -> dict[str, ExecutorStep]:
    """Tokenizer, tokenized cache, training and evaluation steps of the quickstart, keyed by role.

    The one builder of the quickstart's model steps: ``marin_assets.experiments.quickstart`` calls
    it on the curated documents, the model tests and ``bench/train.py`` on the offline sample.

    Args:
        documents: training documents (jsonl/jsonl.gz ``text``); None uses the offline
            stdlib-docstring sample (its ``train/`` folder).
        validation_documents: held-out documents for the training cache's own ``validation`` split
            (None with ``documents=None``: the sample's ``validation/`` folder; otherwise none).
        size: ``"tiny"`` (README) or ``"test"`` (test suite).
        name: stem of every step name (``tokenizers/<name>-<size>``, ``tokenized/<name>-<size>``, ...).
        tokenizer_documents: what the tokenizer is trained on (default: ``documents``); the
            quickstart gives one fixed drop so that new drops do not change the tokenizer.
        heldout_documents: documents of a separate validation cache ``tokenized/<name>-<size>-heldout``;
            training then reads ``{"web": <tokenized>}`` and reports (and evaluation measures) the
            held-out set as ``heldout``.

    Returns:
        ``tokenizer``, ``tokenized``, ``train``, ``evaluation`` (in dependency order), plus
        ``documents`` first when ``documents`` is None and ``heldout`` when ``heldout_documents``
        is given.
    """
    if size not in SIZES:
        raise ValueError(f"unknown quickstart size {size!r}; choose from {sorted(SIZES)}")
    s = SIZES[size]
    stem = f"{name}-{size}"
    steps: dict[str, ExecutorStep] = {}
    if documents is None:
        docs = sample_documents_step(max_bytes=s.sample_bytes)
        steps["documents"] = docs
        documents = docs / "train"
        validation_documents = validation_documents or docs / "validation"
    tokenizer = default_tokenizer(stem, tokenizer_documents or documents, vocab_size=s.vocab_size)
    tokenized = default_tokenize(stem, documents, tokenizer, validation=validation_documents)
    steps.update(tokenizer=tokenizer, tokenized=tokenized)
    heldout_caches: dict[str, ExecutorStep] | None = None
    if heldout_documents is not None:
        heldout = default_tokenize(f"{stem}-heldout", heldout_documents, tokenizer, is_validation=True)
        steps["heldout"] = heldout
        heldout_caches = {"heldout": heldout}
    train = default_train(
        stem,
        {"web": tokenized} if heldout_caches else tokenized,
        versioned(s.model),
        s.train,
        tags=("quickstart", size),
        validation_sets=heldout_caches,
        eval_harness_tasks=(),  # lm-eval runs in the evaluation step below, on the final export
    )
    evaluation = default_eval(
        train,
        evals=LOCAL_TASKS,
        max_eval_instances=s.max_eval_instances,
        max_eval_batches=s.max_eval_batches,
        validation_caches=heldout_caches,
        name=stem,
    )
    steps.update(train=train, evaluation=evaluation)
    return steps
