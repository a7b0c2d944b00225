"""Marin's ``marin.generation.llm_generation``: the language model behind a generation step.

Two back ends with one interface, :class:`BaseLLMProvider` (``generate(prompts) -> texts``):

* :class:`vLLMProvider` -- Marin's: vLLM's ``LLM`` with ``engine_kwargs`` and ``SamplingParams(**generation_kwargs)``.
  Used where ``vllm`` is installed and an accelerator is visible.
* :class:`TransformersProvider` -- ``transformers`` ``generate`` (CPU, or a GPU when torch sees one):
  the same ``generation_kwargs`` mapped to their ``transformers`` meaning (``max_tokens`` ->
  ``max_new_tokens``, ``temperature`` 0 -> greedy, ``truncate_prompt_tokens`` keeps the prompt's last tokens,
  ``seed`` seeds each batch so a rerun gives the same text).

:func:`auto_provider` picks one (``$MARIN_GENERATION_BACKEND`` = ``vllm`` / ``transformers`` forces it) and
caches it per process, so the shard tasks of one worker load the model once. ``model_name`` is a local
folder, a ``gs://`` (any fsspec) folder copied to a local cache first, or a Hugging Face name read from
the local Hugging Face cache; a model that cannot be had fails with one line naming it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal

from marin_assets.execution.storage import filesystem, is_local

logger = logging.getLogger(__name__)

BACKEND_ENV = "MARIN_GENERATION_BACKEND"
Backend = Literal["vllm", "transformers"]

# vLLM in a Ray worker: one process (Marin sets the same), so the worker's resources are freed with it.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


class ModelUnavailableError(RuntimeError):
    """The model of a generation step cannot be loaded (one line: which and why)."""


class BaseLLMProvider(ABC):
    """A language model that turns prompts into generated texts (Marin's interface)."""

    @abstractmethod
    def __init__(self, model_name: str) -> None: ...

    @abstractmethod
    def generate(self, prompts: list[str]) -> list[str]:
        """One generated text per prompt, in order."""
        raise NotImplementedError

    backend: ClassVar[str] = "base"
    tokenizer: Any = None
    generated_tokens: int = 0
    """New tokens generated so far by this provider (throughput metadata)."""


def vllm_installed() -> bool:
    """Whether ``import vllm`` would succeed (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def accelerator_present() -> bool:
    """Whether torch sees a CUDA/ROCm device (vLLM's accelerators here)."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def choose_backend() -> Backend:
    """``$MARIN_GENERATION_BACKEND`` when set; else vLLM with vLLM installed and an accelerator, else transformers.

    Raises:
        ValueError: an unknown ``$MARIN_GENERATION_BACKEND``.
    """
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced:
        if forced not in ("vllm", "transformers"):
            raise ValueError(f"${BACKEND_ENV}={forced!r}: use 'vllm' or 'transformers'")
        return forced  # type: ignore[return-value]
    return "vllm" if vllm_installed() and accelerator_present() else "transformers"


_LOCAL_COPIES: dict[str, str] = {}


def local_model_path(model_name: str) -> str:
    """A path ``from_pretrained`` can read: a local folder as is, a remote folder copied once per process
    into a temporary folder, a hub name unchanged (read from the local Hugging Face cache).

    Raises:
        ModelUnavailableError: a remote folder that does not exist.
    """
    if "://" not in model_name or is_local(model_name):
        return model_name.removeprefix("file://")
    if model_name not in _LOCAL_COPIES:
        fs, path = filesystem(model_name)
        if not fs.exists(path):
            raise ModelUnavailableError(f"model {model_name!r} does not exist")
        digest = hashlib.sha256(model_name.encode()).hexdigest()[:12]
        target = os.path.join(tempfile.gettempdir(), f"marin-generation-models/{digest}")
        if not os.path.isdir(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            staging = tempfile.mkdtemp(prefix=".copy-", dir=os.path.dirname(target))
            fs.get(path.rstrip("/") + "/", staging + "/", recursive=True)
            try:
                os.rename(staging, target)
            except OSError:  # another task of this machine copied it first: use that copy
                import shutil

                shutil.rmtree(staging, ignore_errors=True)
        _LOCAL_COPIES[model_name] = target
    return _LOCAL_COPIES[model_name]


def _load_error(model_name: str, error: Exception) -> ModelUnavailableError:
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ModelUnavailableError(
        f"cannot load model {model_name!r} ({type(error).__name__}: {first}); give a local model folder "
        "(an HF export), a gs:// folder, or a name in the local Hugging Face cache"
    )


class vLLMProvider(BaseLLMProvider):  # noqa: N801 -- Marin's name
    """vLLM's offline ``LLM`` (Marin's defaults: eager, one device, temperature 0.1, 1024 tokens)."""

    backend: ClassVar[str] = "vllm"
    DEFAULT_ENGINE_KWARGS: ClassVar[dict[str, Any]] = {"tensor_parallel_size": 1, "enforce_eager": True}
    DEFAULT_GENERATION_KWARGS: ClassVar[dict[str, Any]] = {"temperature": 0.1, "max_tokens": 1024}

    def __init__(
        self,
        model_name: str,
        engine_kwargs: dict[str, Any] | None = None,
        generation_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError as error:
            raise ModelUnavailableError(
                f"vLLM is not installed here ({error}); unset ${BACKEND_ENV} to generate with transformers"
            ) from error
        self.model_name = model_name
        self.engine_kwargs = {**self.DEFAULT_ENGINE_KWARGS, **(engine_kwargs or {})}
        self.generation_kwargs = {**self.DEFAULT_GENERATION_KWARGS, **(generation_kwargs or {})}
        try:
            self.llm = LLM(model=local_model_path(model_name), **self.engine_kwargs)
        except Exception as error:  # noqa: BLE001 -- vLLM raises many types; one line names the model
            raise _load_error(model_name, error) from error
        self.sampling_params = SamplingParams(**self.generation_kwargs)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, prompts: list[str]) -> list[str]:
        outputs = self.llm.generate(prompts, self.sampling_params)
        self.generated_tokens += sum(len(o.token_ids) for output in outputs for o in output.outputs)
        return [" ".join(o.text for o in output.outputs) for output in outputs]


class TransformersProvider(BaseLLMProvider):
    """``transformers`` ``AutoModelForCausalLM.generate`` with vLLM's ``generation_kwargs`` mapped.

    ``engine_kwargs`` that mean something here: ``dtype`` (``"float32"`` default on CPU), ``device``
    (``"cpu"`` / ``"cuda"``; default cuda when available), ``max_model_len`` (prompt + new tokens cap).
    vLLM-only engine settings (``tensor_parallel_size``, ``enforce_eager``, ...) are ignored.
    """

    backend: ClassVar[str] = "transformers"
    DEFAULT_GENERATION_KWARGS: ClassVar[dict[str, Any]] = {"temperature": 0.1, "max_tokens": 1024}

    def __init__(
        self,
        model_name: str,
        engine_kwargs: dict[str, Any] | None = None,
        generation_kwargs: dict[str, Any] | None = None,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_name = model_name
        self.engine_kwargs = dict(engine_kwargs or {})
        self.generation_kwargs = {**self.DEFAULT_GENERATION_KWARGS, **(generation_kwargs or {})}
        path = local_model_path(model_name)
        device = self.engine_kwargs.get("device") or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype = getattr(torch, str(self.engine_kwargs.get("dtype", "float32")).removeprefix("torch."))
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        except (OSError, ValueError) as error:
            raise _load_error(model_name, error) from error
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token or self.tokenizer.unk_token
        self.tokenizer.padding_side = "left"  # decoder-only: new tokens follow every prompt's last token
        self.device = device
        self.torch = torch

    def _generate_kwargs(self) -> dict[str, Any]:
        g = self.generation_kwargs
        out: dict[str, Any] = {
            "max_new_tokens": int(g.get("max_tokens", 16)),
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        temperature = float(g.get("temperature", 1.0))
        if temperature > 0:
            out.update(do_sample=True, temperature=temperature, top_p=float(g.get("top_p", 1.0)))
            if g.get("top_k", -1) not in (None, -1, 0):
                out["top_k"] = int(g["top_k"])
        else:
            out["do_sample"] = False
        if g.get("n", 1) != 1:
            out["num_return_sequences"] = int(g["n"])
        return out

    def _prompt_budget(self) -> int | None:
        cap = self.generation_kwargs.get("truncate_prompt_tokens")
        max_len = self.engine_kwargs.get("max_model_len") or getattr(self.model.config, "max_position_embeddings", None)
        room = int(max_len) - int(self.generation_kwargs.get("max_tokens", 16)) if max_len else None
        budgets = [int(b) for b in (cap, room) if b is not None and int(b) > 0]
        return min(budgets) if budgets else None

    def generate(self, prompts: list[str]) -> list[str]:
        if not prompts:
            return []
        torch = self.torch
        budget = self._prompt_budget()
        self.tokenizer.truncation_side = "left"  # vLLM's truncate_prompt_tokens keeps the last tokens
        batch = self.tokenizer(
            prompts, return_tensors="pt", padding=True, truncation=budget is not None, max_length=budget,
            add_special_tokens=False, return_token_type_ids=False,
        ).to(self.device)  # fmt: skip
        seed = self.generation_kwargs.get("seed", 0)
        torch.manual_seed(int(seed) if seed is not None else 0)
        with torch.no_grad():
            out = self.model.generate(**batch, **self._generate_kwargs())
        new = out[:, batch["input_ids"].shape[1] :]
        self.generated_tokens += int((new != self.tokenizer.pad_token_id).sum())
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        n = int(self.generation_kwargs.get("n", 1))
        return [" ".join(texts[i * n : (i + 1) * n]) for i in range(len(prompts))]


_PROVIDERS: dict[tuple[str, str, str, str], BaseLLMProvider] = {}


def auto_provider(
    model_name: str,
    engine_kwargs: dict[str, Any] | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    backend: Backend | None = None,
) -> BaseLLMProvider:
    """The provider for ``model_name`` on ``backend`` (default :func:`choose_backend`), cached per process."""
    import json

    chosen = backend or choose_backend()
    key = (chosen, model_name, json.dumps(engine_kwargs or {}, sort_keys=True, default=str),
           json.dumps(generation_kwargs or {}, sort_keys=True, default=str))  # fmt: skip
    if key not in _PROVIDERS:
        cls = vLLMProvider if chosen == "vllm" else TransformersProvider
        logger.info("loading %s with %s", model_name, chosen)
        _PROVIDERS[key] = cls(model_name, engine_kwargs, generation_kwargs)
    return _PROVIDERS[key]
