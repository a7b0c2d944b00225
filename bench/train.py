"""Benchmark: the train step vs ``levanter.main.train_lm`` run directly on the same config,
and (``--quickstart``) the whole "tiny" quickstart: wall time, peak RSS, loss start/end.

    .venv/bin/python bench/train.py [--steps 100] [--repeat 2] [--quickstart]
    python bench/train.py --device gpu --cache DIR --tokenizer DIR [--steps 100] [--batch 64] \
        [--attn-backend jax_flash] [--xla-flag FLAG ...] [--no-recompute] [--mp p=f32,c=bfloat16]

Prints figures and ratios; no timed asserts. Throughput is Levanter's own
``throughput/tokens_per_second`` (steady state: the first 20% of steps, with compilation, are
dropped), MFU Levanter's ``throughput/mfu`` (on accelerators), plus wall-clock tokens/s including
process start-up, the time from start to the first training step (the first metric record in the
log), and the CPU seconds of the training process and of this one (``RUSAGE_CHILDREN`` +
``RUSAGE_SELF``: less sensitive than wall time to the other jobs of a shared machine).

The step and ``train_lm`` run ``--repeat`` times, interleaved (the order alternates each round, so
a change of load hurts both alike), and the best of each figure is compared. The direct run's wall
time includes writing its reference checkpoint and YAML (what ``train_lm`` needs to run this config
offline; the step's subprocess does the same inside its wall time).

``--device gpu``: Marin's ``llama_300m`` shape (seq 1024, d 768, ff 2688, 12 heads, 12 layers) on the
GPU, from a tokenized cache and tokenizer given on the command line (``../shared/gpu/prep_data.py``
builds both with the project's functions: a 32k-vocab BPE over the CPython standard library); the step
is ``run_levanter_train_lm`` with ``GpuConfig(1)`` called in this process (the engine's Ray hop left
out, as in ``../shared/gpu/``); peak GPU memory is sampled with ``nvidia-smi``. The knob flags set the
same ``TrainerSpec`` / ``LmTrainSpec`` fields for both runs (the product's defaults when absent).
"""

from __future__ import annotations

# A bench file named like a stdlib module would shadow it when bench/ is on sys.path: drop bench/ first.
import os as _os
import sys as _sys

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from marin_resources.ray_head import stop_embedded_head  # noqa: E402 - targeted: only this temp dir's Ray

for _k, _v in {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
}.items():
    os.environ.setdefault(_k, _v)


class PeakRss:
    """Peak summed RSS of this process, its descendants and the processes of our Ray temp dir."""

    def __init__(self, ray_tmp: str) -> None:
        self.ray_tmp = ray_tmp
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        import psutil

        me = psutil.Process()
        procs = {me.pid: me}
        with contextlib.suppress(psutil.Error):
            for c in me.children(recursive=True):
                procs[c.pid] = c
        for p in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if any(self.ray_tmp in part for part in (p.info["cmdline"] or [])):
                    procs[p.pid] = p
                    for c in p.children(recursive=True):
                        procs[c.pid] = c
        total = 0
        for p in procs.values():
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            time.sleep(0.5)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class FirstStep:
    """Seconds from ``t0`` until ``log_path`` first holds a training step's metric record."""

    def __init__(self, log_path: str, t0: float) -> None:
        self.log_path, self.t0, self.seconds = log_path, t0, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from marin_assets.training.training_log import parse_metrics

        while not self._stop.wait(0.2):
            with contextlib.suppress(OSError):
                with open(self.log_path, encoding="utf-8", errors="replace") as handle:
                    steps, _ = parse_metrics(handle.read())
                if any("train/loss" in m for m in steps.values()):
                    self.seconds = time.monotonic() - self.t0
                    return

    def __enter__(self) -> FirstStep:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class GpuPeak:
    """Peak used GPU memory (GiB, all GPUs summed) sampled with ``nvidia-smi`` (None without it)."""

    def __init__(self) -> None:
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout
            except (OSError, subprocess.TimeoutExpired):
                return
            used = sum(float(x) for x in out.split() if x.strip()) / 1024
            self.peak = max(self.peak or 0.0, used)

    def __enter__(self) -> GpuPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def steady_mean(log_text: str, key: str) -> float | None:
    from marin_assets.training.training_log import parse_metrics

    steps, _ = parse_metrics(log_text)
    values = [float(m[key]) for _, m in sorted(steps.items()) if key in m]
    values = values[len(values) // 5 :]
    return sum(values) / len(values) if values else None


LLAMA_300M = dict(seq_len=1024, hidden_dim=768, intermediate_dim=2688, num_heads=12, num_kv_heads=12, num_layers=12)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds of step and train_lm (best kept)")
    parser.add_argument("--quickstart", action="store_true", help="also run the whole tiny quickstart")
    parser.add_argument("--work", default="/tmp/bench-train")
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--cache", help="--device gpu: a tokenized cache root (train/ and validation/)")
    parser.add_argument("--tokenizer", help="--device gpu: the cache's tokenizer folder")
    parser.add_argument("--batch", type=int, default=None, help="sequences per step (cpu 32, gpu 64)")
    parser.add_argument("--attn-backend", default=None, help="Levanter AttentionBackend value")
    parser.add_argument("--mp", default=None, help="jmp policy, e.g. p=f32,c=bfloat16")
    parser.add_argument("--no-recompute", action="store_true", help="gradient_checkpointing=False")
    parser.add_argument("--per-device-parallelism", type=int, default=-1)
    parser.add_argument("--xla-flag", action="append", default=None, help="added to XLA_FLAGS (repeatable)")
    args = parser.parse_args()
    if args.device == "gpu" and not (args.cache and args.tokenizer):
        parser.error("--device gpu needs --cache and --tokenizer (see ../shared/gpu/prep_data.py)")

    from marin_assets.execution.runner import run_steps
    from marin_assets.execution.status import read_metadata
    from marin_assets.execution.versioning import StepGraph
    from marin_assets.experiments.quickstart_steps import SIZES, quickstart_model_steps
    from marin_assets.training.levanter_config import (
        build_levanter_config,
        levanter_config_yaml,
        reference_checkpoint_dir,
        write_reference_checkpoint,
    )
    from marin_assets.training.train_config import LlamaModelConfig
    from marin_assets.training.training import (
        LmTrainSpec,
        MixtureSpec,
        OptimizerSpec,
        SourceSpec,
        TrainerSpec,
        TrainLmOnPodConfig,
        run_levanter_train_lm,
        training_process_env,
    )
    from marin_resources.accelerators import GpuConfig

    work = args.work
    ray_tmp = tempfile.mkdtemp(prefix="mbr-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = ray_tmp
    try:
        gpu = args.device == "gpu"
        if gpu:
            cache, tokenizer, model = args.cache, args.tokenizer, LlamaModelConfig(**LLAMA_300M)
        else:
            prefix = os.path.join(work, "prefix")
            if args.quickstart:
                shutil.rmtree(prefix, ignore_errors=True)
            steps = list(quickstart_model_steps(size="tiny").values())
            t0 = time.monotonic()
            with PeakRss(ray_tmp) as rss:
                report = run_steps(steps, prefix, run_only=None)
            wall = time.monotonic() - t0
            assert not report.failed, [o.error for o in report.failed]
            graph = StepGraph(steps, prefix)
            paths = {graph.resolved(s).name.split("/")[0]: graph.resolved(s).output_path for s in steps}
            train_meta = read_metadata(paths["checkpoints"])
            if args.quickstart:
                print(
                    f"quickstart tiny: wall {wall:.0f} s, peak RSS {rss.peak / 2**30:.2f} GiB, cores={os.cpu_count()}"
                )
                for o in report.outcomes:
                    print(f"  {o.name:32s} {o.action:7s} {o.seconds:6.1f} s")
                print(
                    f"  loss {train_meta['initial_loss']:.3f} -> {train_meta['final_loss']:.3f}; eval loss {train_meta['initial_eval_loss']:.3f} -> {train_meta['eval_loss']:.3f}"
                )
                print(f"  eval: {read_metadata(paths['evaluation'])['metrics']['value']}")
                t0 = time.monotonic()
                again = run_steps(steps, prefix)
                print(f"  second run: {sorted({o.action for o in again.outcomes})} in {time.monotonic() - t0:.1f} s")
            cache, tokenizer, model = paths["tokenized"], None, SIZES["tiny"].model
        batch = args.batch or (64 if gpu else 32)

        # Train step vs train_lm directly, same config (--steps steps).
        def pod(out: str) -> TrainLmOnPodConfig:
            return TrainLmOnPodConfig(
                train_config=LmTrainSpec(
                    data=MixtureSpec(
                        configs={"data": SourceSpec(cache)}, train_weights={"data": 1.0}, tokenizer=tokenizer
                    ),
                    trainer=TrainerSpec(
                        train_batch_size=batch,
                        num_train_steps=args.steps,
                        checkpoint_every=args.steps,
                        steps_per_eval=10 * args.steps,
                        max_eval_batches=8,
                        per_device_parallelism=args.per_device_parallelism,
                        mp=args.mp,
                        xla_flags=tuple(args.xla_flag) if args.xla_flag is not None else None,
                    ),
                    model=model,
                    optimizer=OptimizerSpec(learning_rate=3e-3, weight_decay=0.0, warmup=0.05, min_lr_ratio=0.1),
                    hf_save_steps=args.steps,
                    attn_backend=args.attn_backend,
                    gradient_checkpointing=False if args.no_recompute else None,
                ),
                resources=GpuConfig(gpu_count=1) if gpu else None,
                output_path=out,
            )

        def children_cpu() -> float:
            """CPU seconds of this process and its reaped children (the training subprocesses)."""
            usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
            return sum(u.ru_utime + u.ru_stime for u in usage)

        def run_step(round_: int) -> dict:
            cfg = pod(os.path.join(work, f"step-{round_}"))
            shutil.rmtree(cfg.output_path, ignore_errors=True)
            t0, c0 = time.monotonic(), children_cpu()
            with FirstStep(os.path.join(cfg.output_path, "train.log"), t0) as first, GpuPeak() as peak:
                meta = run_levanter_train_lm(cfg)
            wall, cpu = time.monotonic() - t0, children_cpu() - c0
            with open(os.path.join(cfg.output_path, "train.log")) as handle:
                text = handle.read()
            return figures(text, wall, cpu, first.seconds, peak.peak, meta["tokens_seen"])

        def run_direct(round_: int) -> dict:
            cfg = pod(os.path.join(work, f"direct-{round_}"))
            shutil.rmtree(cfg.output_path, ignore_errors=True)
            t0, c0 = time.monotonic(), children_cpu()
            lev = build_levanter_config(cfg)
            write_reference_checkpoint(
                reference_checkpoint_dir(cfg.output_path, lev.trainer.id), lev.model, lev.data.tokenizer
            )
            os.makedirs(cfg.output_path, exist_ok=True)
            yaml_path = os.path.join(cfg.output_path, "cfg.yaml")
            with open(yaml_path, "w") as handle:
                handle.write(levanter_config_yaml(lev))
            log_path = os.path.join(cfg.output_path, "direct.log")
            with open(log_path, "wb") as log, FirstStep(log_path, t0) as first, GpuPeak() as peak:
                subprocess.run(
                    [sys.executable, "-m", "levanter.main.train_lm", "--config_path", yaml_path],
                    env=training_process_env(cfg),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    check=True,
                )
            wall, cpu = time.monotonic() - t0, children_cpu() - c0
            with open(log_path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            return figures(
                text, wall, cpu, first.seconds, peak.peak, lev.trainer.num_train_steps * batch * model.seq_len
            )

        def figures(text: str, wall: float, cpu: float, first_s, peak_gib, tokens: int) -> dict:
            return {
                "tps": steady_mean(text, "throughput/tokens_per_second") or 0.0,
                "mfu": steady_mean(text, "throughput/mfu"),
                "step_s": steady_mean(text, "throughput/duration"),
                "wall": wall,
                "cpu": cpu,
                "first_step_s": first_s,
                "peak_gib": peak_gib,
                "tokens": tokens,
            }

        def fmt(value, spec: str) -> str:
            return "-" if value is None else format(value, spec)

        best: dict[str, dict] = {}
        for round_ in range(max(1, args.repeat)):
            order = ("step", "direct") if round_ % 2 == 0 else ("direct", "step")
            for kind in order:
                got = run_step(round_) if kind == "step" else run_direct(round_)
                b = best.setdefault(kind, dict(got))
                b["tps"] = max(b["tps"], got["tps"])
                for key in ("wall", "cpu", "first_step_s"):
                    if got[key] is not None and (b[key] is None or got[key] < b[key]):
                        b[key] = got[key]
                print(
                    f"  round {round_ + 1} {kind:6s}: steady {got['tps']:10,.0f} tok/s, MFU {fmt(got['mfu'], '.1f')}%, "
                    f"step {fmt(got['step_s'], '.3f')} s, first step after {fmt(got['first_step_s'], '.1f')} s, "
                    f"wall {got['wall']:6.1f} s, cpu {got['cpu']:6.1f} s, peak GPU {fmt(got['peak_gib'], '.1f')} GiB, "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        for kind, label in (("step", "train step:     "), ("direct", "train_lm direct:")):
            b = best[kind]
            print(
                f"{label} steady {b['tps']:10,.0f} tok/s, MFU {fmt(b['mfu'], '.1f')}%, first step after "
                f"{fmt(b['first_step_s'], '.1f')} s, wall {b['wall']:6.1f} s ({b['tokens'] / b['wall']:9,.0f} tok/s incl. "
                f"start-up), cpu {b['cpu']:6.1f} s"
            )
        s, d = best["step"], best["direct"]
        print(
            f"ratio step/direct (best of {max(1, args.repeat)}, {args.device}): steady {s['tps'] / d['tps']:.3f}, "
            f"wall {d['wall'] / s['wall']:.3f}, cpu {d['cpu'] / s['cpu']:.3f}"
        )
    finally:
        if args.device == "cpu":  # the GPU mode starts no Ray (a GPU machine may not have it)
            import ray

            ray.shutdown()
            stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
