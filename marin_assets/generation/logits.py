"""Marin's ``marin.generation.logits``: a forward pass over a dataset, its log-probabilities and logits kept.

``compute_logits(TextLogitsConfig(model_name, input_path, output_path, batch_size, max_length, memory_gb,
span_chars))`` reads ``input_path`` -- a ``.txt`` file (cut into ``span_chars``-character spans, as Marin
does), a JSON-lines file, or a folder of them (``**/*.jsonl.gz`` and the like) -- runs the model on each
record's ``text`` (at most ``max_length`` tokens) and writes, per input file,
``<output_path>/<same relative path>`` (a ``.txt`` input: ``<name>.jsonl.gz``) with records::

    {"id", "text", "input_ids", "token_logprobs", "sum_logprob", "num_tokens", "logits"}

``token_logprobs[i]`` is the log-probability of token ``i + 1`` given the tokens before it. ``logits`` is
Marin's column: every position's full logits (``logits_top_k`` = k keeps the k largest per position as
``{"ids", "values"}`` instead; 0 leaves the column out).

Back ends as for generation: ``transformers`` (CPU, or a GPU torch sees) computes everything; vLLM (installed,
on an accelerator) gives ``token_logprobs`` and top-k from its prompt log-probabilities (no full logits, so
``logits_top_k`` must be given). Sharded and resumable like every stage: one task per input file, a finished
output file is not redone. ``memory_gb`` is Marin's Ray memory request, accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marin_assets.core.documents import step_path
from marin_assets.core.io import JsonlShardWriter, iter_records
from marin_assets.core.shard_stage import Counters, Quarantine, ShardPool, ShardResult, ShardStage, find_shards
from marin_assets.execution.step import StepPath
from marin_assets.execution.storage import exists, filesystem, join_path, read_text

JSONL_SUFFIXES = (".jsonl.gz", ".jsonl.zst", ".jsonl", ".json.gz")


@dataclass
class TextLogitsConfig:
    """Marin's config of the logits step.

    Attributes:
        model_name: a local model folder (an HF export), a ``gs://`` folder or a name in the local HF cache.
        input_path: a ``.txt`` file, a JSON-lines file, or a folder of JSON-lines files.
        output_path: where the per-file results go.
        batch_size: records per forward pass.
        max_length: tokens per record (longer texts are cut).
        memory_gb: Marin's memory request for its TPU task (accepted).
        span_chars: characters per span of a ``.txt`` input.
        logits_top_k: None: full logits per position (Marin); k > 0: the k largest; 0: no ``logits`` column.
        text_column: the record field read as text.
    """

    model_name: StepPath
    input_path: StepPath
    output_path: StepPath
    batch_size: int = 8
    max_length: int = 2048
    memory_gb: int = 10
    span_chars: int = 4096
    logits_top_k: int | None = None
    text_column: str = "text"


def _spans(text: str, span_chars: int) -> list[str]:
    return [text[i : i + span_chars] for i in range(0, len(text), span_chars) if text[i : i + span_chars].strip()]


class _TransformersScorer:
    """Forward passes with ``transformers`` (loaded once per process)."""

    backend = "transformers"

    def __init__(self, model_name: str) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from marin_assets.generation.llm_generation import _load_error, local_model_path

        path = local_model_path(model_name)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device).eval()
        except (OSError, ValueError) as error:
            raise _load_error(model_name, error) from error
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.tokenizer.padding_side = "right"
        self.torch = torch

    def score(self, texts: list[str], max_length: int, top_k: int | None) -> list[dict[str, Any]]:
        torch = self.torch
        batch = self.tokenizer(
            texts,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=max_length,
            return_token_type_ids=False,
        )
        batch = batch.to(self.device)
        with torch.no_grad():
            logits = self.model(**batch).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1)
        out = []
        for row in range(len(texts)):
            n = int(batch["attention_mask"][row].sum())
            ids = batch["input_ids"][row, :n]
            token_lp = (
                logprobs[row, : n - 1].gather(-1, ids[1:].unsqueeze(-1)).squeeze(-1) if n > 1 else ids[:0].float()
            )
            rec: dict[str, Any] = {
                "input_ids": ids.tolist(),
                "token_logprobs": [round(v, 6) for v in token_lp.tolist()],
                "sum_logprob": float(token_lp.sum()),
                "num_tokens": n,
            }
            if top_k is None:
                rec["logits"] = logits[row, :n].tolist()
            elif top_k > 0:
                values, idx = logits[row, :n].topk(min(top_k, logits.shape[-1]), dim=-1)
                rec["logits"] = {"ids": idx.tolist(), "values": values.tolist()}
            out.append(rec)
        return out


class _VllmScorer:
    """Prompt log-probabilities from vLLM (``max_tokens=1``, ``prompt_logprobs=k``)."""

    backend = "vllm"

    def __init__(self, model_name: str) -> None:
        from marin_assets.generation.llm_generation import vLLMProvider

        self.provider = vLLMProvider(model_name, {}, {"max_tokens": 1, "temperature": 0.0})
        self.tokenizer = self.provider.tokenizer

    def score(self, texts: list[str], max_length: int, top_k: int | None) -> list[dict[str, Any]]:
        from vllm import SamplingParams

        if top_k is None:
            raise ValueError("vLLM gives no full logits: set TextLogitsConfig.logits_top_k (or force transformers)")
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=max(1, top_k))
        prompts = [{"prompt_token_ids": self.tokenizer.encode(t)[:max_length]} for t in texts]
        out = []
        for request in self.provider.llm.generate(prompts, params):
            ids = list(request.prompt_token_ids)
            positions = request.prompt_logprobs[1:]
            token_lp = [float(p[tok].logprob) for p, tok in zip(positions, ids[1:], strict=True)]
            rec: dict[str, Any] = {"input_ids": ids, "token_logprobs": token_lp, "sum_logprob": sum(token_lp),
                                   "num_tokens": len(ids)}  # fmt: skip
            if top_k > 0:
                best = [sorted(p.items(), key=lambda kv: -kv[1].logprob)[:top_k] for p in positions]
                rec["logits"] = {"ids": [[k for k, _ in b] for b in best],
                                 "values": [[v.logprob for _, v in b] for b in best]}  # fmt: skip
            out.append(rec)
        return out


_SCORERS: dict[tuple[str, str], Any] = {}


def scorer(model_name: str) -> Any:
    """The forward-pass back end for ``model_name`` (cached per process)."""
    from marin_assets.generation.llm_generation import choose_backend

    backend = choose_backend()
    if (backend, model_name) not in _SCORERS:
        _SCORERS[(backend, model_name)] = (_VllmScorer if backend == "vllm" else _TransformersScorer)(model_name)
    return _SCORERS[(backend, model_name)]


class LogitsStage(ShardStage):
    """One input file -> one file of per-record log-probabilities (and logits); finished files kept."""

    stage = "logits"
    mirror = True
    output_dirs = ("quarantine",)

    def __init__(self, config: TextLogitsConfig) -> None:
        super().__init__(step_path(config.input_path), step_path(config.output_path))
        self.config = config

    def _single_file(self) -> bool:
        fs, path = filesystem(self.input_path)
        return fs.isfile(path)

    def shards(self) -> list[str]:
        if self._single_file():
            return [self.input_path]
        return [s for suffix in JSONL_SUFFIXES for s in find_shards(self.input_path, suffix)]

    def relative_path(self, shard: str) -> str:
        if shard == self.input_path:
            return shard.rstrip("/").rsplit("/", 1)[-1]
        return super().relative_path(shard)

    def cleared_dirs(self, shards: list[str]) -> list[str]:
        return []  # finished output files are what a resumed attempt keeps

    def output_file(self, shard: str) -> str:
        rel = self.relative_path(shard)
        for suffix in (".txt", *JSONL_SUFFIXES):
            if rel.endswith(suffix):
                rel = rel[: -len(suffix)]
                break
        return join_path(self.output_path, rel + ".jsonl.gz")

    def records(self, shard: str, counters: Counters, quarantine: Quarantine) -> list[dict[str, Any]]:
        if shard.endswith(".txt"):
            text = read_text(shard) or ""
            stem = shard.rstrip("/").rsplit("/", 1)[-1]
            spans = _spans(text, self.config.span_chars)
            counters.add("documents_in", len(spans))
            return [{"id": f"{stem}:{i}", "text": s} for i, s in enumerate(spans)]
        out = []
        for line, record in iter_records(shard):
            counters.add("documents_in")
            value = record.get(self.config.text_column) if isinstance(record, dict) else None
            if not isinstance(value, str) or not value.strip():
                quarantine.add("no_text", f"{self.config.text_column} is {type(value).__name__}", line=line)
                continue
            out.append({"id": record.get("id", f"{line}"), "text": value})
        return out

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        target = self.output_file(shard)
        if exists(target):
            counters.add("shards_resumed")
            return {"tokens": 0}
        records = self.records(shard, counters, quarantine)
        model = scorer(step_path(self.config.model_name))
        tokens = 0
        size = max(1, self.config.batch_size)
        with counters.timer("forward+write"), JsonlShardWriter(target) as writer:
            for start in range(0, len(records), size):
                batch = records[start : start + size]
                scored = model.score([r["text"] for r in batch], self.config.max_length, self.config.logits_top_k)
                for record, result in zip(batch, scored, strict=True):
                    tokens += result["num_tokens"]
                    writer.write({**record, **result})
        counters.add("documents_out", writer.records)
        return {"tokens": tokens, "backend": model.backend}

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        tokens = sum(int(r.extra["tokens"]) for r in results if r.extra)
        seconds = sum(r.seconds.get("forward+write", 0.0) for r in results)
        return {"tokens": tokens, "tokens_per_second": round(tokens / seconds, 1) if seconds > 0 else 0.0}


def compute_logits(config: TextLogitsConfig) -> dict[str, Any]:
    """Step function (Marin's name): log-probabilities and logits of every record; returns metadata.

    Raises:
        FileNotFoundError: nothing to read at ``input_path``.
        ModelUnavailableError: the model cannot be loaded (one line naming it).
    """
    from marin_assets.core.shard_stage import shard_pool
    from marin_assets.generation.llm_generation import choose_backend

    stage = LogitsStage(config)
    if not stage.shards():
        raise FileNotFoundError(
            f"nothing to compute logits for at {config.input_path} (a .txt or JSON-lines file or folder)"
        )
    if choose_backend() == "vllm":
        with shard_pool(ShardPool(backend="local", workers=1)):
            return stage.run()
    return stage.run()
