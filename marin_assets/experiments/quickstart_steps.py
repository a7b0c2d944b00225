"""The model half of the quickstart: documents -> tokenizer -> tokenized cache -> tiny model -> eval.

``quickstart_model_steps(documents)`` returns the four steps; the lead wires ``documents`` to the
curation output (until then :func:`marin_assets.experiments.sample_documents.sample_documents_step`
provides offline documents). Two sizes:

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
) -> list[ExecutorStep]:
    """Tokenizer, tokenized cache, training and evaluation steps for the quickstart.

    Args:
        documents: training documents (jsonl/jsonl.gz ``text``); None uses the offline
            stdlib-docstring sample (its ``train/`` folder).
        validation_documents: held-out documents for the cache's ``validation`` split (None with
            ``documents=None``: the sample's ``validation/`` folder; otherwise no validation split).
        size: ``"tiny"`` (README) or ``"test"`` (test suite).
        name: suffix of every step name (``tokenizers/<name>``, ``tokenized/<name>``, ...).

    Returns:
        ``[tokenizer, tokenized, train, eval]`` (plus the sample documents step first when
        ``documents`` is None).
    """
    if size not in SIZES:
        raise ValueError(f"unknown quickstart size {size!r}; choose from {sorted(SIZES)}")
    s = SIZES[size]
    steps: list[ExecutorStep] = []
    if documents is None:
        docs = sample_documents_step(max_bytes=s.sample_bytes)
        steps.append(docs)
        documents = docs / "train"
        validation_documents = validation_documents or docs / "validation"
    tokenizer = default_tokenizer(f"{name}-{size}", documents, vocab_size=s.vocab_size)
    tokenized = default_tokenize(f"{name}-{size}", documents, tokenizer, validation=validation_documents)
    train = default_train(
        f"{name}-{size}",
        tokenized,
        versioned(s.model),
        s.train,
        tags=("quickstart", size),
        eval_harness_tasks=(),  # lm-eval runs in the evaluation step below, on the final export
    )
    evaluation = default_eval(
        train,
        evals=LOCAL_TASKS,
        max_eval_instances=s.max_eval_instances,
        max_eval_batches=s.max_eval_batches,
        name=f"{name}-{size}",
    )
    return [*steps, tokenizer, tokenized, train, evaluation]
