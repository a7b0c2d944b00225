"""The curation pipeline as executor steps (partitioned by data drop) plus asset-check functions.

``curation_steps(landing_dir)`` returns, keyed by short role name (each step runs Marin's stage
function under Marin's name)::

    raw            curation/raw            per drop   run_raw: landing files -> Dolma shards + quarantine
    text           curation/text           per drop   html_to_md: HTML -> main-content text (resiliparse)
    quality_training_set  curation/quality_training_set  global  fixed labelled set (reference hq vs web sample)
    quality_model  curation/quality_model  global     train: fastText on the labelled set (no drop changes it)
    quality        curation/quality        per drop   run_inference: {id, attributes: {quality: {label: p}}}
    dedup          curation/dedup          per drop   dedupe: {duplicate_text: spans, fuzzy_duplicate, ...}, index
    consolidated   curation/consolidated   per drop   consolidate: classify + remove_docs + remove_spans filters

Every per-drop stage keeps Marin's layout: a file's output has the input file's relative path
(``docs/<shard>.jsonl.gz`` throughout), so ``consolidate`` finds each attribute file by that path.

Partitioned steps use one partition set per landing source -- named after the source by default
(``landing/web`` -> ``"web"``; ``partition_set=`` chooses another) -- and read their drop with
``this_partition()``. The raw step declares the set's source (the valid drops of the landing zone,
:class:`~marin_assets.landing.zone.LandingDrops`), so two sources never share a set: a drop of one
never enters another's runs, dedup chain or partition lists.
Dependencies: raw -> text -> quality (<- quality_model <- quality_training_set); text -> dedup;
text + quality + dedup -> consolidated. Only dedup crosses drops (it reads the indices of earlier
drops from its sibling partitions, see ``dedupe.py``, so drops are deduplicated in id order): a new
drop runs only its own units, and no earlier drop is re-scored or re-consolidated.

The check functions are plain Python returning ``(passed, metadata)``; the Dagster bridge wraps
them as asset checks. They take resolved paths (a step's partition output path).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from marin_assets.classifiers.utils import DatasetConfig
from marin_assets.core.io import list_files, read_jsonl_gz
from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    output_path_of,
    this_output_path,
    this_partition,
    versioned,
)
from marin_assets.execution.storage import filesystem, join_path, read_text
from marin_assets.experiments.quality_reference import (
    NEGATIVE_DIR,
    POSITIVE_DIR,
    QualityTrainingSetConfig,
    write_quality_training_set,
)
from marin_assets.landing.zone import LandingDrops
from marin_assets.processing.classification.consolidate import (
    ConsolidateConfig,
    FilterConfig,
    FilterType,
    consolidate,
)
from marin_assets.processing.classification.dedupe import FUZZY_DUPLICATE, DedupeConfig, dedupe
from marin_assets.processing.classification.fasttext.train_fasttext import TrainFasttextClassifierConfig, train
from marin_assets.processing.classification.inference import InferenceConfig, run_inference
from marin_assets.schemas.web.convert import ResiliparseConfig
from marin_assets.transform.raw.process import RawConfig, run_raw
from marin_assets.transform.simple_html_to_md.process import SimpleHtmlToMdConfig, html_to_md
from marin_resources.accelerators import CpuConfig

QUALITY_ATTRIBUTE = "quality"
"""Attribute name of the classifier's scores (``{label: probability}``)."""
DUPLICATE_ATTRIBUTE = "duplicate_text"
"""Attribute name of the duplicate paragraph spans (Marin's default)."""
# Main-content plain text with paragraph breaks kept: the paragraph dedup works on those lines.
CURATION_EXTRACTION = ResiliparseConfig(preserve_formatting=True)
STEP_ROLES = ("raw", "text", "quality_training_set", "quality_model", "quality", "dedup", "consolidated")


def default_partition_set(landing_dir: str) -> str:
    """The partition set of a landing source: named after the source (``landing/web`` -> ``web``)."""
    return LandingDrops(landing_dir).source


@dataclass(frozen=True)
class RawOptions:
    """How the landing files are read (``RawConfig``)."""

    text_key: str = "text"
    """The field or column holding a record's text; versioned when not ``text``."""
    id_key: str = "id"
    """The field or column holding a record's id; versioned when not ``id``."""
    max_doc_bytes: int = 10_000_000
    docs_per_shard: int = 1000


@dataclass(frozen=True)
class QualityOptions:
    """The quality classifier: its fixed labelled set, its fastText training, the filter's threshold."""

    threshold: float = 0.5
    """Documents scored below it for ``hq`` are removed by ``consolidated``."""
    documents_per_class: int = 1200
    negative_drops: tuple[str, ...] = ()
    """Drops pinned as extra negatives of the labelled set -- re-training on drops is this explicit
    change, never a side effect of a new drop."""
    holdout_fraction: float = 0.2
    epoch: int = 20
    lr: float = 0.5
    word_ngrams: int = 2
    dim: int = 50
    bucket: int = 200_000


@dataclass(frozen=True)
class DedupOptions:
    """Exact paragraph and MinHash-LSH document dedup (``DedupeConfig``)."""

    ngram: int = 5
    num_perm: int = 112
    bands: int = 14
    fuzzy_threshold: float = 0.7
    min_paragraph_chars: int = 30


@dataclass(frozen=True)
class CurationOptions:
    """Everything :func:`curation_steps` takes besides the landing zone, grouped by stage."""

    name_prefix: str = "curation"
    """Step names are ``<name_prefix>/<role>``."""
    partition_set: str | None = None
    """The partition set of the per-drop steps (default: the source's name,
    :func:`default_partition_set`). Not versioned. Two sources must not share one."""
    use_ray: bool = True
    """The per-drop stage steps declare ``CpuConfig(num_cpus=1)`` resources, so the engine launches
    each as a Ray task and the shard-stage base runs its shards as Ray tasks; False: in process,
    shards on the local pool (``shard_stage.current_pool``). Not versioned: it does not change the output."""
    revision: int = 0
    """An explicit reprocess of every drop (e.g. after a processed drop's files were replaced, which
    is otherwise never read again): versioned when not 0, so every step of the source gets a new hash
    and new output folders; the old outputs stay as they were."""
    raw: RawOptions = RawOptions()
    quality: QualityOptions = QualityOptions()
    dedup: DedupOptions = DedupOptions()


# curation_steps' keyword arguments (scripts and the docs pass them): where each lives in CurationOptions.
KEYWORDS: dict[str, tuple[str | None, str]] = {
    "name_prefix": (None, "name_prefix"),
    "partition_set": (None, "partition_set"),
    "use_ray": (None, "use_ray"),
    "revision": (None, "revision"),
    "text_key": ("raw", "text_key"),
    "id_key": ("raw", "id_key"),
    "max_doc_bytes": ("raw", "max_doc_bytes"),
    "docs_per_shard": ("raw", "docs_per_shard"),
    "quality_threshold": ("quality", "threshold"),
    "classifier_documents_per_class": ("quality", "documents_per_class"),
    "classifier_negative_drops": ("quality", "negative_drops"),
    "holdout_fraction": ("quality", "holdout_fraction"),
    "fasttext_epoch": ("quality", "epoch"),
    "fasttext_lr": ("quality", "lr"),
    "fasttext_word_ngrams": ("quality", "word_ngrams"),
    "fasttext_dim": ("quality", "dim"),
    "fasttext_bucket": ("quality", "bucket"),
    "ngram": ("dedup", "ngram"),
    "num_perm": ("dedup", "num_perm"),
    "bands": ("dedup", "bands"),
    "fuzzy_threshold": ("dedup", "fuzzy_threshold"),
    "min_paragraph_chars": ("dedup", "min_paragraph_chars"),
}


def curation_options(base: CurationOptions | None = None, **keywords: Any) -> CurationOptions:
    """``base`` (default: the defaults) with :data:`KEYWORDS`-named values replaced."""
    options = base or CurationOptions()
    unknown = sorted(set(keywords) - set(KEYWORDS))
    if unknown:
        raise TypeError(f"curation_steps() got unexpected keyword argument(s) {unknown}")
    top = {field: keywords[k] for k, (group, field) in KEYWORDS.items() if group is None and k in keywords}
    for group in ("raw", "quality", "dedup"):
        given = {field: keywords[k] for k, (g, field) in KEYWORDS.items() if g == group and k in keywords}
        if given:
            top[group] = dataclasses.replace(getattr(options, group), **given)
    return dataclasses.replace(options, **top)


def curation_steps(
    landing_dir: str, options: CurationOptions | None = None, **keywords: Any
) -> dict[str, ExecutorStep]:
    """The curation steps for one landing source, keyed by role (:data:`STEP_ROLES`).

    Args:
        landing_dir: ``<prefix>/landing/<source>`` -- absolute/URL, or relative to the executor
            prefix (e.g. ``"landing/sample-html"``, which keeps versions prefix-independent).
        options: the stages' parameters, grouped (:class:`CurationOptions`; each field says what it does).
        keywords: the same by their flat names (:data:`KEYWORDS`: ``use_ray=False``,
            ``classifier_negative_drops=(...)``, ``fasttext_epoch=5`` ...), on top of ``options``.
    """
    options = curation_options(options, **keywords)
    partition_set = options.partition_set or default_partition_set(landing_dir)
    stage = _Stage(options.name_prefix, partition_set, CpuConfig(num_cpus=1) if options.use_ray else None)
    raw = _raw_step(stage, landing_dir, options.raw, options.revision)
    text = _text_step(stage, raw)
    quality_training_set, quality_model, quality = _quality_steps(stage, text, options.quality)
    dedup = _dedup_step(stage, text, options.dedup)
    consolidated = _consolidated_step(stage, text, quality, dedup, options.quality.threshold)
    return {
        "raw": raw,
        "text": text,
        "quality_training_set": quality_training_set,
        "quality_model": quality_model,
        "quality": quality,
        "dedup": dedup,
        "consolidated": consolidated,
    }


@dataclass(frozen=True)
class _Stage:
    """What every step of one source shares: its name prefix, its partition set, its per-drop resources."""

    name_prefix: str
    partition_set: str
    resources: CpuConfig | None


def _raw_step(stage: _Stage, landing_dir: str, raw: RawOptions, revision: int) -> ExecutorStep:
    return ExecutorStep(
        name=f"{stage.name_prefix}/raw",
        fn=run_raw,
        resources=stage.resources,
        config=RawConfig(
            landing_dir=InputName.hardcoded(landing_dir),
            drop_id=this_partition(),
            output_path=this_output_path(),
            docs_per_shard=versioned(raw.docs_per_shard),
            max_doc_bytes=versioned(raw.max_doc_bytes),
            # The defaults stay out of the version, so sources that use them keep their versions.
            text_key=raw.text_key if raw.text_key == "text" else versioned(raw.text_key),
            id_key=raw.id_key if raw.id_key == "id" else versioned(raw.id_key),
            revision=versioned(revision) if revision else 0,
        ),
        description="Raw documents of a data drop as Dolma jsonl.gz shards; bad input quarantined.",
        partitioned_by=stage.partition_set,
        # The raw step reads the landing zone, so it declares where the partition keys come from.
        partition_source=LandingDrops(landing_dir),
        pip_dependency_groups=["curation"],
    )


def _text_step(stage: _Stage, raw: ExecutorStep) -> ExecutorStep:
    return ExecutorStep(
        name=f"{stage.name_prefix}/text",
        fn=html_to_md,
        resources=stage.resources,
        config=SimpleHtmlToMdConfig(
            input_path=output_path_of(raw),
            output_path=this_output_path(),
            extract_method=versioned("resiliparse"),
            config=versioned(CURATION_EXTRACTION),
        ),
        description="Main-content plain text extracted from HTML with resiliparse.",
        partitioned_by=stage.partition_set,
        pip_dependency_groups=["curation"],
    )


def _quality_steps(
    stage: _Stage, text: ExecutorStep, quality: QualityOptions
) -> tuple[ExecutorStep, ExecutorStep, ExecutorStep]:
    """The labelled set, the fastText model trained on it, and the per-drop scores."""
    training_set = ExecutorStep(
        name=f"{stage.name_prefix}/quality_training_set",
        fn=write_quality_training_set,
        config=QualityTrainingSetConfig(
            output_path=this_output_path(),
            documents_per_class=versioned(quality.documents_per_class),
            negative_drop_paths=[text.at_partition(drop) for drop in quality.negative_drops],
        ),
        description="Fixed labelled set of the quality classifier: reference high-quality text (positives), "
        "a sample of raw web text (negatives); drops carry no labels.",
        pip_dependency_groups=["curation"],
    )
    model = ExecutorStep(
        name=f"{stage.name_prefix}/quality_model",
        fn=train,
        config=TrainFasttextClassifierConfig(
            output_path=this_output_path(),
            datasets=[
                DatasetConfig(input_doc_path=output_path_of(training_set, POSITIVE_DIR), label="hq"),
                DatasetConfig(input_doc_path=output_path_of(training_set, NEGATIVE_DIR), label="lq"),
            ],
            fasttext_args={
                "epoch": versioned(quality.epoch),
                "lr": versioned(quality.lr),
                "wordNgrams": versioned(quality.word_ngrams),
                "dim": versioned(quality.dim),
                "minCount": versioned(1),
                "bucket": versioned(quality.bucket),
                # Not versioned (hashes unchanged). One thread: the same model bytes on every recompute;
                # more threads train hogwild and are not repeatable (classifiers/fasttext/training.py).
                "thread": 1,
            },
            val_frac=versioned(quality.holdout_fraction),
        ),
        description="fastText quality classifier trained on the fixed labelled set (not on the drops).",
        pip_dependency_groups=["curation"],
    )
    scores = ExecutorStep(
        name=f"{stage.name_prefix}/quality",
        fn=run_inference,
        resources=stage.resources,
        config=InferenceConfig(
            input_path=output_path_of(text),
            output_path=this_output_path(),
            model_name=output_path_of(model),
            model_type="fasttext",
            attribute_name=versioned(QUALITY_ATTRIBUTE),
        ),
        description="Quality label probabilities of every document of a drop (mirrored attribute files).",
        partitioned_by=stage.partition_set,
        pip_dependency_groups=["curation"],
    )
    return training_set, model, scores


def _dedup_step(stage: _Stage, text: ExecutorStep, dedup: DedupOptions) -> ExecutorStep:
    return ExecutorStep(
        name=f"{stage.name_prefix}/dedup",
        fn=dedupe,
        resources=stage.resources,
        config=DedupeConfig(
            input_path=output_path_of(text),
            output_path=this_output_path(),
            attribute_name=versioned(DUPLICATE_ATTRIBUTE),
            drop_id=this_partition(),
            # No landing_dir: the partition keys (valid drops only -- the sensor's checksum-verified
            # set in Dagster, discover_drops on the command line) order the chain through
            # sequential_partitions, so a drop rejected by its checksums never blocks later drops.
            minhash_ngram=versioned(dedup.ngram),
            num_perm=versioned(dedup.num_perm),
            bands=versioned(dedup.bands),
            threshold=versioned(dedup.fuzzy_threshold),
            min_paragraph_chars=versioned(dedup.min_paragraph_chars),
        ),
        description="Exact paragraph + MinHash-LSH document dedup against this and all earlier drops.",
        partitioned_by=stage.partition_set,
        # Drop N reads the indices of every earlier drop: the engine runs drops in key order and
        # a Dagster run for drop N waits while another run is still computing drop N-1.
        sequential_partitions=True,
    )


def _consolidated_step(
    stage: _Stage, text: ExecutorStep, quality: ExecutorStep, dedup: ExecutorStep, threshold: float
) -> ExecutorStep:
    return ExecutorStep(
        name=f"{stage.name_prefix}/consolidated",
        fn=consolidate,
        resources=stage.resources,
        config=ConsolidateConfig(
            input_path=output_path_of(text),
            output_path=this_output_path(),
            filters=[
                FilterConfig(
                    type=FilterType.CLASSIFY,
                    attribute_path=output_path_of(quality),
                    name=QUALITY_ATTRIBUTE,
                    label="__label__hq",
                    threshold=versioned(threshold),
                ),
                FilterConfig(type=FilterType.REMOVE_DOC, attribute_path=output_path_of(dedup), name=FUZZY_DUPLICATE),
                FilterConfig(
                    type=FilterType.REMOVE_SPANS, attribute_path=output_path_of(dedup), name=DUPLICATE_ATTRIBUTE
                ),
            ],
        ),
        description="Cleaned documents of a drop: quality filter and dedup applied.",
        partitioned_by=stage.partition_set,
    )


# ------------------------------------------------------------------------------------------
# Asset checks: (passed, metadata); paths are a step's resolved (partition) output path.


def _docs(path: str) -> list[dict[str, Any]]:
    return [rec for shard in list_files(join_path(path, "docs"), ".jsonl.gz") for rec in read_jsonl_gz(shard)]


def check_ids_unique(output_path: str) -> tuple[bool, dict[str, Any]]:
    """Every document id in ``<output_path>/docs`` occurs once."""
    seen: set[str] = set()
    repeated: list[str] = []
    n = 0
    for rec in _docs(output_path):
        n += 1
        if rec["id"] in seen:
            repeated.append(rec["id"])
        seen.add(rec["id"])
    return not repeated, {"documents": n, "repeated_ids": len(repeated), "examples": repeated[:5]}


def check_no_empty_text(output_path: str) -> tuple[bool, dict[str, Any]]:
    """No document in ``<output_path>/docs`` has empty (whitespace-only) text."""
    empty = [rec["id"] for rec in _docs(output_path) if not str(rec.get("text", "")).strip()]
    return not empty, {"empty_documents": len(empty), "examples": empty[:5]}


def check_classifier_accuracy(model_path: str, floor: float = 0.8) -> tuple[bool, dict[str, Any]]:
    """The classifier's held-out accuracy (``report.json``) is at least ``floor``."""
    text = read_text(join_path(model_path, "report.json"))
    if text is None:
        return False, {"error": "report.json missing"}
    report = json.loads(text)
    accuracy = float(report.get("holdout_accuracy", 0.0))
    return accuracy >= floor, {"holdout_accuracy": round(accuracy, 4), "floor": floor, "holdout": report.get("holdout")}


def check_planted_duplicates_removed(
    consolidated_path: str, ground_truth_path: str | None
) -> tuple[bool, dict[str, Any]]:
    """Sample data only: planted exact/near duplicates are gone, quoted paragraphs cut.

    Only copies of documents dedup saw count: originals in this drop or in an earlier drop that was
    processed (its consolidated output sits beside this one). A copy of a document in a drop that
    never became a partition (rejected by its checksums) is no duplicate to dedup, and is listed as
    ``originals_not_seen``. Without a ground-truth file (real data) the check passes and says it was
    skipped.
    """
    text = read_text(ground_truth_path) if ground_truth_path else None
    if text is None:
        return True, {"skipped": "no ground truth for this drop"}
    truth = json.loads(text)
    seen = _processed_drops(consolidated_path) | {truth.get("drop_id")}

    def counted(entry: dict[str, Any]) -> bool:
        of_drop = entry.get("of_drop") or _drop_of(str(entry.get("of", "")))
        return of_drop is None or of_drop in seen

    docs = {rec["id"]: rec["text"] for rec in _docs(consolidated_path)}
    copies = truth["exact_dups"] + truth["near_dups"]
    planted = [d["id"] for d in copies if counted(d)]
    paragraphs = [d for d in truth["para_dups"] if counted(d)]
    survivors = [i for i in planted if i in docs]
    para_left = [d["id"] for d in paragraphs if d["id"] in docs and d["paragraph"] in docs[d["id"]]]
    passed = not survivors and not para_left
    return passed, {
        "planted_document_duplicates": len(planted),
        "surviving_document_duplicates": len(survivors),
        "planted_paragraph_duplicates": len(paragraphs),
        "surviving_paragraph_duplicates": len(para_left),
        "originals_not_seen": len(copies) - len(planted) + len(truth["para_dups"]) - len(paragraphs),
        "examples": (survivors + para_left)[:5],
    }


_SAMPLE_ID = re.compile(r"^(.+)-\d{6}$")


def _drop_of(doc_id: str) -> str | None:
    """The drop of a sample document id (``drop-002-000123`` -> ``drop-002``); None when unknown."""
    match = _SAMPLE_ID.match(doc_id)
    return match.group(1) if match else None


def _processed_drops(partition_path: str) -> set[str]:
    """The partitions of a step whose outputs sit beside ``partition_path`` (``<step output>/<drop>``)."""
    parent = partition_path.rstrip("/").rsplit("/", 1)[0]
    fs, path = filesystem(parent)
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return set()
    return {e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"}
