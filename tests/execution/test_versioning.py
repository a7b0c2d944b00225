"""Versions, hashes and output paths follow Marin's algorithm."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import pytest

from marin_assets.execution import ExecutorStep, InputName, StepGraph, output_path_of, this_output_path, versioned
from marin_assets.execution.versioning import instantiate_config


@dataclass(frozen=True)
class Inner:
    lr: object = 0.1
    layers: object = 2


@dataclass(frozen=True)
class Config:
    output_path: object = None
    input_path: object = None
    seed: object = 0
    note: str = "ignored"
    inner: Inner = field(default_factory=Inner)
    files: list = field(default_factory=list)
    weights: dict = field(default_factory=dict)


def noop(config: Config) -> None:
    return None


def md5_6(version: dict) -> str:
    return hashlib.md5(json.dumps(version, sort_keys=True).encode()).hexdigest()[:6]


def test_golden_hash_of_a_single_step_matches_marins_algorithm():
    step = ExecutorStep("data/raw", noop, Config(output_path=this_output_path(), seed=versioned(42)))
    graph = StepGraph([step], "/prefix")
    node = graph.resolved(step)
    expected = {"name": "data/raw", "config": {"seed": 42}, "dependencies": []}
    assert node.version == expected
    assert node.hash == md5_6(expected)
    assert node.hash == "605eee"  # golden: changing the algorithm must be deliberate
    assert node.output_path == f"/prefix/data/raw-{node.hash}"


def test_golden_hash_with_dependency_nested_fields_lists_and_dicts():
    raw = ExecutorStep("data/raw", noop, Config(output_path=this_output_path(), seed=versioned(42)))
    tok = ExecutorStep(
        "tokenized/raw",
        noop,
        Config(
            output_path=this_output_path(),
            input_path=output_path_of(raw, "shards"),
            inner=Inner(lr=versioned(3e-4), layers=4),
            files=[versioned("a.txt"), raw / "extra"],
            weights={"web": versioned(0.7)},
        ),
    )
    node = StepGraph([tok], "gs://bucket/x").resolved(tok)
    raw_version = {"name": "data/raw", "config": {"seed": 42}, "dependencies": []}
    # Marin's rule: list items are keyed "<field>.[i]", and every reference takes the next DEP index
    # and its own entry in "dependencies" (raw is referenced twice: DEP[0] and DEP[1]).
    expected = {
        "name": "tokenized/raw",
        "config": {
            "input_path": "DEP[0]/shards",
            "inner.lr": 3e-4,
            "files.[0]": "a.txt",
            "files.[1]": "DEP[1]/extra",
            "weights.web": 0.7,
        },
        "dependencies": [raw_version, raw_version],
    }
    assert node.version == expected
    assert node.hash == md5_6(expected) == "4694ce"
    assert node.output_path == f"gs://bucket/x/tokenized/raw-{node.hash}"


def test_non_versioned_fields_function_and_resources_do_not_change_the_hash():
    a = ExecutorStep(
        "s", noop, Config(output_path=this_output_path(), seed=versioned(1), note="x", inner=Inner(layers=2))
    )
    b = ExecutorStep(
        "s",
        print,
        Config(output_path=this_output_path(), seed=versioned(1), note="y", inner=Inner(layers=9)),
        resources=object(),
        description="other",
    )
    c = ExecutorStep("s", noop, Config(output_path=this_output_path(), seed=versioned(2)))
    graph = StepGraph([a, b, c], "/p")
    assert graph.resolved(a).hash == graph.resolved(b).hash
    assert graph.resolved(a).hash != graph.resolved(c).hash


def test_dependency_change_propagates_to_every_dependent():
    def chain(seed: int) -> tuple[ExecutorStep, ExecutorStep, ExecutorStep]:
        a = ExecutorStep("a", noop, Config(output_path=this_output_path(), seed=versioned(seed)))
        b = ExecutorStep("b", noop, Config(output_path=this_output_path(), input_path=output_path_of(a)))
        c = ExecutorStep("c", noop, Config(output_path=this_output_path(), input_path=output_path_of(b)))
        return a, b, c

    one, two = chain(1), chain(2)
    g1, g2 = StepGraph([one[2]], "/p"), StepGraph([two[2]], "/p")
    for x, y in zip(one, two, strict=True):
        assert g1.resolved(x).hash != g2.resolved(y).hash


def test_hardcoded_paths_under_the_prefix_hash_the_same_on_any_prefix():
    def step(prefix: str) -> ExecutorStep:
        return ExecutorStep(
            "s", noop, Config(output_path=this_output_path(), input_path=InputName.hardcoded(f"{prefix}/raw/web"))
        )

    local, bucket = step("/home/me/data"), step("gs://bucket/marin")
    h_local = StepGraph([local], "/home/me/data").resolved(local)
    h_bucket = StepGraph([bucket], "gs://bucket/marin").resolved(bucket)
    assert h_local.version["config"]["input_path"] == "raw/web"
    assert h_local.hash == h_bucket.hash
    relative = ExecutorStep(
        "s", noop, Config(output_path=this_output_path(), input_path=InputName.hardcoded("raw/web"))
    )
    assert StepGraph([relative], "/x").resolved(relative).hash == h_local.hash
    outside = ExecutorStep(
        "s", noop, Config(output_path=this_output_path(), input_path=InputName.hardcoded("/elsewhere/raw/web"))
    )
    assert StepGraph([outside], "/home/me/data").resolved(outside).hash != h_local.hash


def test_identical_steps_are_merged_into_one():
    a1 = ExecutorStep("a", noop, Config(output_path=this_output_path(), seed=versioned(5)))
    a2 = ExecutorStep("a", noop, Config(output_path=this_output_path(), seed=versioned(5)))
    b = ExecutorStep("b", noop, Config(output_path=this_output_path(), files=[output_path_of(a1), output_path_of(a2)]))
    graph = StepGraph([b, a2], "/p")
    assert graph.resolved(a1) is graph.resolved(a2)
    assert [n.name for n in graph.topological()] == ["a", "b"]
    # Merged for running (one node), but each reference keeps its own DEP index, as in Marin.
    assert graph.resolved(b).dependencies == [graph.resolved(a1)]
    assert graph.resolved(b).version["config"] == {"files.[0]": "DEP[0]", "files.[1]": "DEP[1]"}


def test_instantiate_replaces_every_placeholder():
    a = ExecutorStep("a", noop, Config(output_path=this_output_path(), seed=versioned(5)))
    b = ExecutorStep(
        "b",
        noop,
        Config(
            output_path=this_output_path("out"),
            input_path=a / "x",
            seed=versioned(3),
            files=[InputName.hardcoded("raw/f")],
            inner=Inner(lr=versioned(0.5)),
        ),
    )
    graph = StepGraph([b], "/p")
    node = graph.resolved(b)
    config = instantiate_config(b.config, node, None, graph)
    assert config.output_path == f"{node.output_path}/out"
    assert config.input_path == f"{graph.resolved(a).output_path}/x"
    assert config.seed == 3 and config.inner.lr == 0.5
    assert config.files == ["/p/raw/f"]


def test_nonblocking_dependency_versions_but_does_not_block():
    a = ExecutorStep("a", noop, Config(output_path=this_output_path(), seed=versioned(5)))
    b = ExecutorStep("b", noop, Config(output_path=this_output_path(), input_path=a.nonblocking()))
    node = StepGraph([b], "/p").resolved(b)
    assert node.dependencies == []
    assert node.version["config"] == {"input_path": "DEP[0]"}  # Marin: one DEP counter for both kinds
    assert node.version["pseudo_dependencies"][0]["name"] == "a"


def test_partitions_consumed_by_an_unpartitioned_step_enter_its_version():
    drops = ExecutorStep(
        "docs", noop, Config(output_path=this_output_path(), seed=versioned(1)), partitioned_by="drops"
    )
    index = ExecutorStep("index", noop, Config(output_path=this_output_path(), files=[drops.partitions()]))
    g2 = StepGraph([index], "/p", {"drops": ["d1", "d2"]})
    g3 = StepGraph([index], "/p", {"drops": ["d2", "d1", "d3"]})
    assert g2.resolved(drops).hash == g3.resolved(drops).hash  # the partitioned step itself: unchanged
    assert g2.resolved(index).hash != g3.resolved(index).hash  # its consumer: new path
    config = instantiate_config(index.config, g3.resolved(index), None, g3)
    base = g3.resolved(drops).output_path
    assert config.files == [[f"{base}/d1", f"{base}/d2", f"{base}/d3"]]


@pytest.mark.parametrize("name", ["../escape", "/abs", "a//b", "a/./b", "bad name", "x\x00y", "a/" + "b" * 200])
def test_unsafe_step_names_are_rejected(name):
    with pytest.raises(ValueError, match="name"):
        ExecutorStep(name, noop, Config())


def test_dependency_cycle_is_reported():
    @dataclass(frozen=True)
    class Mutable:
        ref: list

    holder: list = []
    a = ExecutorStep("a", noop, Mutable(ref=holder))
    b = ExecutorStep("b", noop, Mutable(ref=[output_path_of(a)]))
    holder.append(output_path_of(b))
    with pytest.raises(ValueError, match="cycle"):
        StepGraph([b], "/p")


def test_one_fixed_partition_enters_the_version_and_resolves_to_its_folder():
    drops = ExecutorStep(
        "docs", noop, Config(output_path=this_output_path(), seed=versioned(1)), partitioned_by="drops"
    )
    tok1 = ExecutorStep(
        "tok", noop, Config(output_path=this_output_path(), input_path=(drops / "docs").at_partition("d1"))
    )
    tok2 = ExecutorStep("tok", noop, Config(output_path=this_output_path(), input_path=drops.at_partition("d2")))
    g_small = StepGraph([tok1, tok2], "/p", {"drops": ["d1", "d2"]})
    g_big = StepGraph([tok1], "/p", {"drops": ["d1", "d2", "d3"]})
    node = g_small.resolved(tok1)
    assert node.version["config"] == {"input_path": "DEP[0]@d1/docs"}
    assert node.hash == g_big.resolved(tok1).hash  # new drops do not change a fixed-partition consumer
    assert node.hash != g_small.resolved(tok2).hash
    config = instantiate_config(tok1.config, node, None, g_small)
    assert config.input_path == f"{g_small.resolved(drops).output_path}/d1/docs"
    assert node.partitions_needed(g_small.resolved(drops), None, g_small) == ["d1"]
    with pytest.raises(ValueError, match="unsafe partition key"):
        drops.at_partition("../d1")


def test_every_hash_is_the_md5_of_the_whole_nested_version():
    """The graph composes a step's JSON from its dependencies' texts; it must equal encoding the
    whole nested version (dependencies twice, pseudo dependencies, consumed partitions, int keys,
    non-ASCII text)."""
    raw = ExecutorStep("data/raw", noop, Config(output_path=this_output_path(), seed=versioned("café")))
    drops = ExecutorStep(
        "docs", noop, Config(output_path=this_output_path(), input_path=raw, seed=versioned(1)), partitioned_by="drops"
    )
    side = ExecutorStep("side", noop, Config(output_path=this_output_path(), weights={"b": versioned({10: 1, 2: 3})}))
    top = ExecutorStep(
        "top",
        noop,
        Config(
            output_path=this_output_path(),
            input_path=side.nonblocking(),
            files=[raw, raw / "again", drops.partitions(), drops.at_partition("d1")],
            inner=Inner(lr=versioned(1e-3)),
        ),
    )
    graph = StepGraph([top, side], "/p", {"drops": ["d2", "d1"]})
    nodes = graph.topological()
    assert sorted(n.name for n in nodes) == ["data/raw", "docs", "side", "top"]
    for node in nodes:
        expected = json.loads(json.dumps(node.version, sort_keys=True))
        assert node.hash == md5_6(expected), node.name
    assert {d["name"] for d in graph.resolved(top).version["dependencies"]} == {"data/raw", "docs"}
    assert len(graph.resolved(top).version["dependencies"]) == 4  # every reference counts, as in Marin
