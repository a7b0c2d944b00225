"""A tiny causal language model built here, never downloaded: the project's own byte-level BPE tokenizer
(trained on the given texts) and a 2-layer Llama from ``transformers``, optionally trained for a few
hundred steps with torch to continue prompts with given answers (the datashop's "labeller")."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

SPECIAL = ["<s>", "</s>", "<pad>", "<unk>"]


def build_tiny_lm(
    path: Path,
    texts: Sequence[str],
    *,
    examples: Sequence[tuple[str, str]] = (),
    steps: int = 0,
    seed: int = 0,
    vocab_size: int = 512,
    hidden: int = 64,
    max_positions: int = 256,
) -> Path:
    """Write an HF model folder at ``path``; with ``examples`` ``(prompt, answer)`` and ``steps``, train
    it (loss on the answer tokens only) so that greedy generation after ``prompt`` gives ``answer``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from marin_assets.processing.tokenize.train_tokenizer import build_fast_tokenizer

    corpus = list(texts) + [p + a for p, a in examples]
    tokenizer = build_fast_tokenizer(corpus, vocab_size=vocab_size, special_tokens=SPECIAL, min_frequency=1)
    tokenizer.pad_token, tokenizer.eos_token, tokenizer.bos_token, tokenizer.unk_token = (
        SPECIAL[2],
        SPECIAL[1],
        SPECIAL[0],
        SPECIAL[3],
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 4, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=max_positions,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
        )
    )  # fmt: skip
    if examples and steps:
        encoded = []
        for prompt, answer in examples:
            p = tokenizer.encode(prompt, add_special_tokens=False)
            a = tokenizer.encode(answer, add_special_tokens=False) + [tokenizer.eos_token_id]
            ids = (p + a)[-max_positions:]
            encoded.append((ids, len(ids) - len(a)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        rng = random.Random(seed)
        model.train()
        for _ in range(steps):
            batch = rng.sample(encoded, min(16, len(encoded)))
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.full((len(batch), width), tokenizer.pad_token_id)
            labels = torch.full((len(batch), width), -100)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (ids, answer_start) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                labels[row, answer_start : len(ids)] = torch.tensor(ids[answer_start:])
                mask[row, : len(ids)] = 1
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
