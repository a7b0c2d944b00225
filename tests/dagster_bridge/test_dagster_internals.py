"""Dagster's private API is used in one module only (``dagster_bridge/dagster_internals.py``), and
what it takes from there still means what Dagster means by it."""

from __future__ import annotations

import ast
from pathlib import Path

import dagster as dg

from marin_assets.dagster_bridge import dagster_internals
from marin_assets.dagster_bridge.partition_sets import observation, partition_set_key, partition_set_version

REPO = Path(__file__).resolve().parents[2]
INTERNALS = REPO / "marin_assets" / "dagster_bridge" / "dagster_internals.py"
TEST_PRIVATE = REPO / "tests" / "dagster_private.py"  # the tests' own uses (test code only)


def _private_dagster_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return [f"{path.relative_to(REPO)}:{name}" for name in names if name.startswith("dagster._")]


def test_no_module_but_the_internals_one_imports_private_dagster():
    files = [
        path
        for top in ("marin_assets", "marin_resources", "tests", "bench", "scripts")
        for path in (REPO / top).rglob("*.py")
        if path not in (INTERNALS, TEST_PRIVATE)
    ]
    files += [path for path in REPO.glob("*.py")]
    assert len(files) > 50
    found = [hit for path in files for hit in _private_dagster_imports(path)]
    assert not found, found
    assert _private_dagster_imports(INTERNALS), "the internals module imports what it documents"
    assert _private_dagster_imports(TEST_PRIVATE)


def test_partition_set_tag_is_the_one_dagster_writes_for_a_data_version(tmp_path):
    """Dagster's own observable source asset, observed through the public API, records its data
    version under the tag our partition-set observations use."""

    @dg.observable_source_asset(key=["internals_probe"])
    def probe() -> dg.DataVersion:
        return dg.DataVersion("v-probe")

    defs = dg.Definitions(assets=[probe], jobs=[dg.define_asset_job("observe_probe", selection=[probe])])
    with dg.DagsterInstance.ephemeral(tempdir=str(tmp_path)) as instance:
        assert defs.resolve_job_def("observe_probe").execute_in_process(instance=instance).success
        records = instance.fetch_observations(dg.AssetKey(["internals_probe"]), limit=1).records
        tags = records[0].asset_observation.tags
    assert tags.get(dagster_internals.DATA_VERSION_TAG) == "v-probe", tags
    assert dagster_internals.DATA_VERSION_TAG == dagster_internals.PERSISTED_DATA_VERSION_TAG
    # Every tag name read from Dagster is the value it persists (the fallback if a name moves).
    assert {name: getattr(dagster_internals, name) for name in dagster_internals.PERSISTED_TAGS} == (
        dagster_internals.PERSISTED_TAGS
    )

    ours = observation("drops", ["d2", "d1"])
    assert ours.asset_key == partition_set_key("drops")
    assert ours.tags[dagster_internals.DATA_VERSION_TAG] == partition_set_version(["d1", "d2"])
