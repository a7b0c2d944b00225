"""Benchmark: the train step vs ``levanter.main.train_lm`` run directly on the same config,
and (``--quickstart``) the whole "tiny" quickstart: wall time, peak RSS, loss start/end.

    .venv/bin/python bench/train.py [--steps 100] [--repeat 2] [--quickstart]

Prints figures and ratios; no timed asserts. Throughput is Levanter's own
``throughput/tokens_per_second`` (steady state: the first 20% of steps, with compilation, are
dropped), plus wall-clock tokens/s including process start-up and the CPU seconds of the training
process and of this one (``RUSAGE_CHILDREN`` + ``RUSAGE_SELF``: less sensitive than wall time to the other jobs of a shared machine).

The step and ``train_lm`` run ``--repeat`` times, interleaved (the order alternates each round, so
a change of load hurts both alike), and the best of each figure is compared. The direct run's wall
time includes writing its reference checkpoint and YAML (what ``train_lm`` needs to run this config
offline; the step's subprocess does the same inside its wall time).
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


def steady_tps(log_text: str) -> float:
    from marin_assets.training.training_log import parse_metrics

    steps, _ = parse_metrics(log_text)
    tps = [
        float(m["throughput/tokens_per_second"])
        for _, m in sorted(steps.items())
        if "throughput/tokens_per_second" in m
    ]
    tps = tps[len(tps) // 5 :]
    return sum(tps) / len(tps)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds of step and train_lm (best kept)")
    parser.add_argument("--quickstart", action="store_true", help="also run the whole tiny quickstart")
    parser.add_argument("--work", default="/tmp/bench-train")
    args = parser.parse_args()

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
    from marin_assets.training.training import (
        LmTrainSpec,
        MixtureSpec,
        OptimizerSpec,
        SourceSpec,
        TrainerSpec,
        TrainLmOnPodConfig,
        run_levanter_train_lm,
        training_env,
    )

    work = args.work
    ray_tmp = tempfile.mkdtemp(prefix="mbr-", dir="/tmp")
    os.environ["MARIN_RAY_TMPDIR"] = ray_tmp
    try:
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
            print(f"quickstart tiny: wall {wall:.0f} s, peak RSS {rss.peak / 2**30:.2f} GiB, cores={os.cpu_count()}")
            for o in report.outcomes:
                print(f"  {o.name:32s} {o.action:7s} {o.seconds:6.1f} s")
            print(
                f"  loss {train_meta['initial_loss']:.3f} -> {train_meta['final_loss']:.3f}; eval loss {train_meta['initial_eval_loss']:.3f} -> {train_meta['eval_loss']:.3f}"
            )
            print(f"  eval: {read_metadata(paths['evaluation'])['metrics']['value']}")
            t0 = time.monotonic()
            again = run_steps(steps, prefix)
            print(f"  second run: {sorted({o.action for o in again.outcomes})} in {time.monotonic() - t0:.1f} s")

        # Train step vs train_lm directly, same config (tiny model, --steps steps).
        tiny = SIZES["tiny"]

        def pod(out: str) -> TrainLmOnPodConfig:
            return TrainLmOnPodConfig(
                train_config=LmTrainSpec(
                    data=MixtureSpec(configs={"data": SourceSpec(paths["tokenized"])}, train_weights={"data": 1.0}),
                    trainer=TrainerSpec(
                        train_batch_size=32,
                        num_train_steps=args.steps,
                        checkpoint_every=args.steps,
                        steps_per_eval=10 * args.steps,
                        max_eval_batches=8,
                    ),
                    model=tiny.model,
                    optimizer=OptimizerSpec(learning_rate=3e-3, weight_decay=0.0, warmup=0.05, min_lr_ratio=0.1),
                    hf_save_steps=args.steps,
                ),
                output_path=out,
            )

        def children_cpu() -> float:
            """CPU seconds of this process and its reaped children (the training subprocesses)."""
            usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
            return sum(u.ru_utime + u.ru_stime for u in usage)

        def run_step(round_: int) -> tuple[float, float, float, int]:
            cfg = pod(os.path.join(work, f"step-{round_}"))
            shutil.rmtree(cfg.output_path, ignore_errors=True)
            t0, c0 = time.monotonic(), children_cpu()
            meta = run_levanter_train_lm(cfg)
            wall, cpu = time.monotonic() - t0, children_cpu() - c0
            with open(os.path.join(cfg.output_path, "train.log")) as handle:
                return steady_tps(handle.read()), wall, cpu, meta["tokens_seen"]

        def run_direct(round_: int) -> tuple[float, float, float]:
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
            proc = subprocess.run(
                [sys.executable, "-m", "levanter.main.train_lm", "--config_path", yaml_path],
                env=training_env(),
                capture_output=True,
                text=True,
                check=True,
            )
            wall, cpu = time.monotonic() - t0, children_cpu() - c0
            return steady_tps(proc.stdout + proc.stderr), wall, cpu

        best = {"step": [0.0, float("inf"), float("inf")], "direct": [0.0, float("inf"), float("inf")]}
        tokens = 0
        for round_ in range(max(1, args.repeat)):
            order = ("step", "direct") if round_ % 2 == 0 else ("direct", "step")
            for kind in order:
                if kind == "step":
                    tps, wall, cpu, tokens = run_step(round_)
                else:
                    tps, wall, cpu = run_direct(round_)
                b = best[kind]
                best[kind] = [max(b[0], tps), min(b[1], wall), min(b[2], cpu)]
                print(
                    f"  round {round_ + 1} {kind:6s}: steady {tps:8,.0f} tok/s, wall {wall:6.1f} s, "
                    f"cpu {cpu:6.1f} s, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
        (step_tps, step_wall, step_cpu), (direct_tps, direct_wall, direct_cpu) = best["step"], best["direct"]
        print(
            f"train step:      steady {step_tps:8,.0f} tok/s, wall {step_wall:6.1f} s ({tokens / step_wall:7,.0f} tok/s incl. start-up), cpu {step_cpu:6.1f} s"
        )
        print(
            f"train_lm direct: steady {direct_tps:8,.0f} tok/s, wall {direct_wall:6.1f} s ({tokens / direct_wall:7,.0f} tok/s incl. start-up), cpu {direct_cpu:6.1f} s"
        )
        print(
            f"ratio step/direct (best of {max(1, args.repeat)}): steady {step_tps / direct_tps:.3f}, "
            f"wall {direct_wall / step_wall:.3f}, cpu {direct_cpu / step_cpu:.3f}"
        )
    finally:
        import ray

        ray.shutdown()
        stop_embedded_head(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
