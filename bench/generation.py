"""Generation benchmark: the CPU labelling step (``marin.generation.inference.run_inference`` with the
``transformers`` back end) and the logits step, against the same model driven directly in the same process.

The model is ``--model DIR`` (an HF folder, e.g. the quickstart's export
``data/checkpoints/<run>/hf/step-N``), else a Llama of the quickstart's shape (hidden 64, 2 layers, 4 heads,
vocab 4096, 128 positions) built here on the project's own tokenizer trained on stdlib docstrings --
randomly initialised: speed, not quality, is measured. Timed, best of ``--rounds``:

* ``labelling`` -- ``run_inference`` over ``--docs`` documents (one shard, in process), ``--max_tokens`` new
  tokens each, greedy, batch ``--batch``: documents/s and generated tokens/s;
* ``direct_generate`` -- the baseline: ``model.generate`` on the same prompts and batches;
* ``logits`` / ``direct_forward`` -- ``compute_logits`` (top-5 logits kept) vs bare forward passes.

Prints one JSON object with the rates, the stage / direct ratios and the load average beside them.

    python -m bench.generation [--model DIR] [--docs 256] [--max_tokens 16] [--batch 32] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ["MARIN_GENERATION_BACKEND"] = "transformers"


def _documents(n: int) -> list[str]:
    import sysconfig

    from marin_assets.experiments.sample_documents import long_docstrings

    texts = []
    for text in long_docstrings(sysconfig.get_paths()["stdlib"]):
        texts.append(" ".join(text.split())[:400])
        if len(texts) >= max(n, 2000):
            break
    return texts


def _model(work: Path, texts: list[str]) -> str:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    tokenizer = build_fast_tokenizer(texts, vocab_size=4096, special_tokens=["<s>", "</s>", "<pad>", "<unk>"])
    tokenizer.pad_token, tokenizer.eos_token = "<pad>", "</s>"
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    )  # fmt: skip
    folder = work / "model"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--max_tokens", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from marin_assets.generation.inference import TextGenerationInferenceConfig, run_inference
    from marin_assets.generation.logits import TextLogitsConfig, compute_logits

    work = Path(tempfile.mkdtemp(prefix="bench-generation-"))
    try:
        texts = _documents(args.docs)
        model_dir = args.model or _model(work, texts)
        docs = texts[: args.docs]
        (work / "docs").mkdir()
        with gzip.open(work / "docs" / "part-0.jsonl.gz", "wt") as handle:
            handle.writelines(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(docs))
        template = "{example}\nFinal score:"
        generation = {"max_tokens": args.max_tokens, "temperature": 0.0}

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
        tokenizer.padding_side = tokenizer.truncation_side = "left"
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        budget = model.config.max_position_embeddings - args.max_tokens
        prompts = [template.format(example=d) for d in docs]

        def direct_generate() -> int:
            new = 0
            tokenizer.padding_side = "left"  # direct_forward pads on the right
            for start in range(0, len(prompts), args.batch):
                batch = tokenizer(prompts[start : start + args.batch], return_tensors="pt", padding=True, truncation=True,
                                  max_length=budget, add_special_tokens=False, return_token_type_ids=False)  # fmt: skip
                with torch.no_grad():
                    out = model.generate(**batch, max_new_tokens=args.max_tokens, do_sample=False,
                                         pad_token_id=tokenizer.pad_token_id)  # fmt: skip
                new += int((out[:, batch["input_ids"].shape[1] :] != tokenizer.pad_token_id).sum())
            return new

        def labelling(round_: int) -> dict:
            return run_inference(
                TextGenerationInferenceConfig(
                    input_path=str(work / "docs"), output_path=str(work / f"labels-{round_}"), model_name=model_dir,
                    engine_kwargs={}, generation_kwargs=generation, template=template, batch_size=args.batch,
                    generated_text_column_name="generated_text",
                )
            )  # fmt: skip

        def direct_forward() -> int:
            tokens = 0
            tokenizer.padding_side = "right"
            for start in range(0, len(docs), 8):
                batch = tokenizer(docs[start : start + 8], return_tensors="pt", padding=True, truncation=True,
                                  max_length=128, return_token_type_ids=False)  # fmt: skip
                with torch.no_grad():
                    torch.log_softmax(model(**batch).logits, dim=-1)
                tokens += int(batch["attention_mask"].sum())
            return tokens

        results: dict[str, dict] = {}

        def best(name: str, seconds: float, **rates: float) -> None:
            if name not in results or seconds < results[name]["seconds"]:
                results[name] = {"seconds": round(seconds, 3), **{k: round(v, 1) for k, v in rates.items()}}

        labelling(-1)  # warm both paths: the model is loaded once per process, as in a worker
        direct_generate()
        for round_ in range(args.rounds):
            start = time.perf_counter()
            new = direct_generate()
            took = time.perf_counter() - start
            best("direct_generate", took, docs_per_second=len(docs) / took, tokens_per_second=new / took)
            start = time.perf_counter()
            meta = labelling(round_)
            took = time.perf_counter() - start
            best("labelling", took, docs_per_second=len(docs) / took,
                 tokens_per_second=meta["generated_tokens"] / took)  # fmt: skip
            start = time.perf_counter()
            tokens = direct_forward()
            took = time.perf_counter() - start
            best("direct_forward", took, tokens_per_second=tokens / took)
            start = time.perf_counter()
            meta = compute_logits(TextLogitsConfig(model_name=model_dir, input_path=str(work / "docs"),
                                                   output_path=str(work / f"logits-{round_}"), max_length=128,
                                                   logits_top_k=5))  # fmt: skip
            took = time.perf_counter() - start
            best("logits", took, tokens_per_second=meta["tokens"] / took)
        report = {
            "model": args.model or "quickstart-shaped Llama (random init)",
            "docs": len(docs), "max_tokens": args.max_tokens, "batch": args.batch, **results,
            "labelling_vs_direct": round(results["direct_generate"]["seconds"] / results["labelling"]["seconds"], 3),
            "logits_vs_direct": round(results["direct_forward"]["seconds"] / results["logits"]["seconds"], 3),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }  # fmt: skip
        print(json.dumps(report))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
