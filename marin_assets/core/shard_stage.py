"""One base for every curation stage that works shard by shard (like datatrove's ``PipelineStep``).

A stage subclasses :class:`ShardStage` (or :class:`DocumentStage` for one-record-in,
at-most-one-record-out stages) and keeps only its per-shard / per-document logic. The base does
the rest, the same way for every stage:

* **listing shards** -- :meth:`ShardStage.shards` (default: the input's ``docs/`` shards);
* **clearing leftovers** of a failed attempt -- every folder in ``output_dirs`` is removed
  before the first shard runs, so nothing of an old attempt mixes into the new one;
* **parallelism** -- shards run through :func:`map_shards` on the pool the engine chose
  (:func:`current_pool`): a step whose ``resources`` made the engine launch it as a Ray task
  fans its shards out as Ray tasks (the nodes they ran on go into the step's ``marin/ran_on``,
  ``shard_nodes``); a step run in process uses a local pool
  (``MARIN_LOCAL_SHARD_WORKERS`` processes; 1, the default, runs the shards in this process).
  Stage configs carry no ``use_ray``;
* **counters with timing** -- :class:`Counters` (``add`` / ``timer``), summed over shards and
  turned into ``documents_in/out``, ``seconds``, ``docs_per_second`` and per-phase seconds;
* **one quarantine writer and schema** -- :class:`Quarantine` writes
  ``quarantine/<shard>.jsonl`` with records ``{stage, file, line, id, reason, detail, sample}``.

Shard outputs are co-sharded with the input (same names) and written atomically through
``io.py``, so a retried shard task rewrites its file and never leaves a half one. In process,
the fsync + rename of each finished file runs in a helper thread (``io.deferred_commits``) while
the next shard is computed; :meth:`ShardStage.run` returns only once every file is committed.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from marin_assets.core.io import (
    JsonlShardWriter,
    deferred_commits,
    iter_records,
    list_files,
    read_jsonl_gz,
    write_jsonl_gz,
)
from marin_assets.execution.metadata import table_markdown
from marin_assets.execution.storage import filesystem, join_path
from marin_resources.ray_connect import in_ray_worker

R = TypeVar("R")

# The intermediate shard format of the stages (read and written only through the helpers below).
SHARD_SUFFIX = ".jsonl.gz"
read_shard = read_jsonl_gz
write_shard = write_jsonl_gz

MAX_QUARANTINE_RECORDS_PER_SHARD = 10_000
SAMPLE_CHARS = 200
QUARANTINE_FIELDS = ("stage", "file", "line", "id", "reason", "detail", "sample", "offset")
LOCAL_WORKERS_ENV = "MARIN_LOCAL_SHARD_WORKERS"


# ------------------------------------------------------------------------------------------
# Quarantine and counters


class Quarantine:
    """Bad input of one shard/file: counted by reason, the first records kept for the file.

    Every stage writes the same schema (``QUARANTINE_FIELDS``); ``line`` is 1-based within
    ``file`` (None for a whole-file problem); ``offset`` is the byte offset in the file where
    damage to its compression or framing begins (None for a problem of one line or record).
    """

    def __init__(self, stage: str, file: str) -> None:
        self.stage = stage
        self.file = file
        self.records: list[dict[str, Any]] = []
        self.counts: Counter[str] = Counter()

    def add(
        self,
        reason: str,
        detail: str,
        *,
        line: int | None = None,
        doc_id: str | None = None,
        sample: bytes | str | None = None,
        count: int = 1,
        offset: int | None = None,
    ) -> None:
        """Quarantine ``count`` items (a whole file's records may go at once) for ``reason``."""
        self.counts[reason] += count
        if len(self.records) >= MAX_QUARANTINE_RECORDS_PER_SHARD:
            return
        if isinstance(sample, bytes):
            sample = sample[:SAMPLE_CHARS].decode("utf-8", errors="replace")
        elif isinstance(sample, str):
            # Lone surrogates cannot be written as UTF-8: keep the sample readable, not lossy-silent.
            sample = sample[:SAMPLE_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
        if isinstance(doc_id, str):
            doc_id = doc_id.encode("utf-8", "backslashreplace").decode("utf-8")
        self.records.append(
            {
                "stage": self.stage,
                "file": self.file,
                "line": line,
                "id": doc_id,
                "reason": reason,
                "detail": detail,
                "sample": sample,
                "offset": offset,
            }
        )

    @property
    def total(self) -> int:
        """Items quarantined (all reasons)."""
        return sum(self.counts.values())

    def write(self, path: str) -> None:
        """Write the kept records to ``path`` (nothing when there are none)."""
        if self.records:
            with JsonlShardWriter(path) as writer:
                for record in self.records:
                    writer.write(record)


class Counters:
    """Named counts and per-phase seconds of one shard (summed over shards by the base)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def add(self, name: str, value: int = 1) -> None:
        """``counts[name] += value``."""
        self.counts[name] += value

    @contextlib.contextmanager
    def timer(self, phase: str) -> Iterator[None]:
        """Add the wall time of the ``with`` block to ``seconds[phase]``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - start


@dataclass
class ShardResult:
    """What one shard task returns to the stage (small: counts, not documents)."""

    shard: str
    counts: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    quarantine: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    extra: Any = None


# ------------------------------------------------------------------------------------------
# Parallelism


@dataclass(frozen=True)
class ShardPool:
    """Where shard tasks run.

    Attributes:
        backend: ``"local"`` (this process, or a process pool) or ``"ray"`` (one Ray task per shard).
        workers: local processes (1: in this process); for Ray, the cluster decides.
        num_cpus: CPUs each Ray shard task requests.
    """

    backend: Literal["local", "ray"] = "local"
    workers: int = 1
    num_cpus: float = 1


_POOL: contextvars.ContextVar[ShardPool | None] = contextvars.ContextVar("marin_shard_pool", default=None)


@contextlib.contextmanager
def shard_pool(pool: ShardPool) -> Iterator[ShardPool]:
    """Run the shard stages called inside the block on ``pool`` (benchmarks, tests, embedders)."""
    token = _POOL.set(pool)
    try:
        yield pool
    finally:
        _POOL.reset(token)


def current_pool() -> ShardPool:
    """The pool for this step's shards, as the engine chose it from the step's ``resources``.

    A step that declares ``resources`` is launched by the engine as a Ray task: its shards become
    Ray tasks too. A step run in process uses ``$MARIN_LOCAL_SHARD_WORKERS`` local processes
    (default 1: in this process). :func:`shard_pool` overrides both.
    """
    chosen = _POOL.get()
    if chosen is not None:
        return chosen
    if in_ray_worker():
        return ShardPool(backend="ray")
    try:
        workers = max(1, int(os.environ.get(LOCAL_WORKERS_ENV, "1")))
    except ValueError:
        workers = 1
    return ShardPool(backend="local", workers=workers)


def map_shards(fn: Callable[..., R], args: Sequence[tuple], pool: ShardPool | None = None) -> list[R]:
    """``[fn(*a) for a in args]`` on ``pool`` (default :func:`current_pool`), results in input order.

    ``fn`` must be a module-level function (Ray workers and spawned processes import it).
    """
    pool = pool or current_pool()
    if not args:
        return []
    if pool.backend == "ray":
        import ray

        from marin_resources.ray_connect import ensure_ray
        from marin_resources.ray_jobs import record_shard_nodes, returning_node

        if not ray.is_initialized():
            ensure_ray()
        remote = ray.remote(num_cpus=pool.num_cpus, max_retries=2)(returning_node(fn))
        placed = ray.get([remote.remote(*a) for a in args])
        # Where the shards ran, for the step's ``marin/ran_on`` (``shard_nodes``).
        record_shard_nodes(node for _, node in placed)
        return [result for result, _ in placed]
    if pool.workers <= 1 or len(args) == 1:
        return [fn(*a) for a in args]
    import concurrent.futures
    import multiprocessing

    # spawn, not fork: the caller may hold threads (Dagster, the runner's heartbeat).
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(pool.workers, len(args)), mp_context=context) as executor:
        return list(executor.map(fn, *zip(*args, strict=True)))


# ------------------------------------------------------------------------------------------
# Stages


def clear_dir(path: str) -> None:
    """Remove the folder ``path`` and everything below it (no error when missing)."""
    fs, p = filesystem(path)
    if fs.exists(p):
        fs.rm(p, recursive=True)


SKIPPED_DIRS = ("quarantine", "index")


def find_shards(input_path: str, suffix: str = SHARD_SUFFIX) -> list[str]:
    """Sorted ``**/*<suffix>`` files below ``input_path`` (Marin's input glob), same scheme.

    Skipped: ``quarantine/`` and ``index/`` folders of our stages, hidden and ``_``-prefixed names
    (temporary files, markers).
    """
    fs, root = filesystem(input_path)
    root = root.rstrip("/")
    try:
        found = fs.find(root)
    except FileNotFoundError:
        return []
    out = []
    for path in found:
        rel = path[len(root) + 1 :] if path.startswith(root + "/") else path.rsplit("/", 1)[-1]
        parts = rel.split("/")
        if not rel.endswith(suffix) or any(p.startswith((".", "_")) for p in parts):
            continue
        if any(p in SKIPPED_DIRS for p in parts[:-1]):
            continue
        out.append(join_path(input_path, rel))
    return sorted(out)


def shard_stem(path: str) -> str:
    """``.../docs/shard-00001.jsonl.gz`` -> ``shard-00001``."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name[: -len(SHARD_SUFFIX)] if name.endswith(SHARD_SUFFIX) else name.split(".", 1)[0]


def _run_shard(stage: ShardStage, shard: str) -> ShardResult:
    """Module-level entry of a shard task (what Ray / the process pool import and call)."""
    return stage.run_shard(shard)


class ShardStage:
    """Base of a shard-by-shard stage; subclasses implement :meth:`process_shard`.

    Class attributes:
        stage: the stage's name in quarantine records and metadata.
        output_dirs: folders below ``output_path`` that one run writes (cleared first).
    """

    stage = "stage"
    output_dirs: tuple[str, ...] = ("docs", "quarantine")
    rate_counter = "documents_in"
    mirror = False
    """Marin's layout: every ``**/*.jsonl.gz`` below the input (but ``quarantine/``, ``index/``
    and hidden or ``_`` names) is a shard, and its output keeps its path relative to the input."""

    def __init__(self, input_path: str, output_path: str) -> None:
        self.input_path = input_path
        self.output_path = output_path

    # -- what a subclass provides
    def shards(self) -> list[str]:
        """The input shards (default: ``<input_path>/docs/*`` shards; every shard below it with ``mirror``)."""
        if self.mirror:
            return find_shards(self.input_path)
        return list_files(join_path(self.input_path, "docs"), SHARD_SUFFIX)

    def relative_path(self, shard: str) -> str:
        """``shard``'s path below the input (its output's path below the output with ``mirror``)."""
        base = self.input_path.rstrip("/") + "/"
        return shard[len(base) :] if shard.startswith(base) else shard.rstrip("/").rsplit("/", 1)[-1]

    def cleared_dirs(self, shards: list[str]) -> list[str]:
        """What one run owns below the output: ``output_dirs`` (plus, with ``mirror``, the top-level
        folders and files the mirrored shards land in)."""
        owned = list(self.output_dirs)
        if self.mirror:
            owned += sorted({self.relative_path(s).split("/", 1)[0] for s in shards} - set(owned))
        return owned

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        """Process one shard; returns anything small (kept as ``ShardResult.extra``)."""
        raise NotImplementedError

    def summarize(self, results: list[ShardResult]) -> dict[str, Any]:
        """Stage-specific metadata on top of the common counters (default: none)."""
        return {}

    # -- what the base does
    def quarantine_file(self, shard: str) -> str:
        """The ``file`` that quarantine records of ``shard`` name (default: its file name)."""
        return shard.rstrip("/").rsplit("/", 1)[-1]

    def quarantine_path(self, shard: str) -> str:
        """``<output>/quarantine/<shard stem>.jsonl`` (with ``mirror``, a shard below a folder other
        than ``docs/`` is named by its relative path, ``/`` -> ``__``, so names never collide)."""
        if self.mirror:
            rel = self.relative_path(shard).removeprefix("docs/")
            stem = rel[: -len(SHARD_SUFFIX)] if rel.endswith(SHARD_SUFFIX) else rel
            return join_path(self.output_path, f"quarantine/{stem.replace('/', '__')}.jsonl")
        return join_path(self.output_path, f"quarantine/{shard_stem(shard)}.jsonl")

    def run_shard(self, shard: str) -> ShardResult:
        """One shard with fresh counters and quarantine (runs in a worker)."""
        counters = Counters()
        quarantine = Quarantine(self.stage, self.quarantine_file(shard))
        with counters.timer("total"):
            extra = self.process_shard(shard, counters, quarantine)
            quarantine.write(self.quarantine_path(shard))
        samples = extra.pop("samples", []) if isinstance(extra, dict) else []
        return ShardResult(
            shard=shard,
            counts=dict(counters.counts),
            seconds=dict(counters.seconds),
            quarantine=dict(quarantine.counts),
            samples=samples,
            extra=extra,
        )

    def run(self) -> dict[str, Any]:
        """Clear leftovers, run every shard on the engine's pool, return the stage's metadata."""
        start = time.monotonic()
        shards = self.shards()
        for sub in self.cleared_dirs(shards):
            clear_dir(join_path(self.output_path, sub))
        pool = current_pool()
        with deferred_commits():  # in-process shards: fsync + rename overlap the next shard's work
            results = map_shards(_run_shard, [(self, s) for s in shards], pool)
        counts: Counter[str] = Counter()
        seconds: Counter[str] = Counter()
        reasons: Counter[str] = Counter()
        for r in results:
            counts.update(r.counts)
            seconds.update(r.seconds)
            reasons.update(r.quarantine)
        wall = time.monotonic() - start
        docs_in = int(counts.get(self.rate_counter, 0))
        meta: dict[str, Any] = {
            **{k: int(v) for k, v in sorted(counts.items())},
            "quarantined": sum(reasons.values()),
            "quarantine_reasons": dict(sorted(reasons.items())),
            "shards": len(shards),
            "pool": f"{pool.backend}:{pool.workers}" if pool.backend == "local" else "ray",
            "seconds": round(wall, 3),
            "docs_per_second": round(docs_in / wall, 1) if wall > 0 else 0.0,
            "shard_seconds": {k: round(v, 3) for k, v in sorted(seconds.items())},
        }
        samples = [s for r in results for s in r.samples][:3]
        if samples:
            meta["samples"] = table_markdown(samples)
        meta.update(self.summarize(results))
        return meta


class DocumentStage(ShardStage):
    """A stage that maps each record of a shard to at most one output record.

    Subclasses implement :meth:`process` (and optionally :meth:`open_shard` for per-shard state,
    e.g. the attribute files of a shard). Output: ``<output>/<out_dir>/<shard name>``.
    """

    out_dir = "docs"
    max_samples = 2
    read_block_bytes = 256 << 10
    """Decompressed bytes read (and decoded) at a time. Small blocks stay in the heap; whole-shard
    blocks (4 MB) were mapped, faulted in and unmapped again shard after shard: in
    ``bench/html_to_text`` the stage's page faults fell from ~25,000 to ~1,000 per 10,000 pages."""

    def open_shard(self, shard: str) -> Any:
        """Per-shard state handed to :meth:`process` (default: None)."""
        return None

    def process(
        self, record: dict[str, Any], state: Any, counters: Counters, quarantine: Quarantine, line: int
    ) -> dict[str, Any] | None:
        """The output record for ``record`` or None (quarantined or filtered, and counted)."""
        raise NotImplementedError

    def sample(self, record: dict[str, Any], out: dict[str, Any]) -> dict[str, Any] | None:
        """A row for the metadata's sample table (None: not a sample)."""
        return None

    def output_file(self, shard: str) -> str:
        """Where ``shard``'s output goes: ``<output>/<out_dir>/<shard name>``, or its mirrored path."""
        if self.mirror:
            return join_path(self.output_path, self.relative_path(shard))
        return join_path(self.output_path, f"{self.out_dir}/{shard.rstrip('/').rsplit('/', 1)[-1]}")

    def process_shard(self, shard: str, counters: Counters, quarantine: Quarantine) -> Any:
        # Streamed: records are read a block at a time and written as they come (one shard's
        # output is never held whole); ``line`` is the record's line in the input file.
        state = self.open_shard(shard)
        samples: list[dict[str, Any]] = []
        documents_in = 0
        with (
            counters.timer("read+process+write"),
            JsonlShardWriter(self.output_file(shard)) as writer,
        ):
            for line, record in iter_records(shard, self.read_block_bytes):
                documents_in += 1
                new = self.process(record, state, counters, quarantine, line)
                if new is None:
                    continue
                writer.write(new)
                if len(samples) < self.max_samples:
                    row = self.sample(record, new)
                    if row is not None:
                        samples.append(row)
        counters.add("documents_in", documents_in)
        counters.add("documents_out", writer.records)
        counters.add("bytes_out", writer.bytes_written)
        return {"samples": samples}
