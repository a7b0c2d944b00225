"""What a person sees in the UI: asset names that say what they are, where the output lives, and
the real cause of a failed step as the first line of the failure."""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from marin_assets.dagster_bridge.location_graph import asset_key_for
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.execution import ExecutorStep, this_output_path
from marin_assets.execution.declarations import Experiment
from marin_assets.experiments.quickstart import build_steps
from marin_resources.dagster_resources import MarinStorageResource, RayResource


def test_quickstart_model_assets_have_distinct_descriptive_labels():
    steps = build_steps("tiny")
    # The lineage graph labels a node with the key's last part.
    labels = {
        role: asset_key_for(steps[role].name).path[-1] for role in ("tokenizer", "tokenized", "train", "evaluation")
    }
    assert labels == {
        "tokenizer": "quickstart_tiny_tokenizer",
        "tokenized": "quickstart_tiny_tokens",
        "train": "quickstart_tiny_model",
        "evaluation": "quickstart_tiny_eval",
    }
    assert asset_key_for("curation/raw") == dg.AssetKey(["curation", "raw"])  # other steps keep their names
    assert asset_key_for("evaluation/x_eval").path[-1] == "x_eval"


@dataclass(frozen=True)
class BrokenConfig:
    output_path: str


def broken_step(config: BrokenConfig) -> None:
    raise ValueError("tokenizer folder has no tokenizer.json (the real cause)")


def test_failed_step_shows_the_real_cause_first_and_the_output_folder_up_front(tmp_path):
    prefix = str(tmp_path / "prefix")
    step = ExecutorStep(name="broken/step", fn=broken_step, config=BrokenConfig(this_output_path()))
    (asset,) = build_step_assets(Experiment(name="broken", steps=[step]), prefix=prefix)
    uri = asset.specs_by_key[dg.AssetKey(["broken", "step"])].metadata["dagster/uri"]
    assert str(uri.value).startswith(f"{prefix}/broken/step-")  # definition metadata, before any run
    result = dg.materialize(
        [asset],
        instance=dg.DagsterInstance.ephemeral(),
        resources={"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()},
        raise_on_error=False,
    )
    (failure,) = result.get_step_failure_events()
    error = failure.step_failure_data.error
    first_line = error.message.strip().splitlines()[0]
    assert "ValueError: tokenizer folder has no tokenizer.json (the real cause)" in first_line
    assert "Error occurred while executing" not in first_line
    assert failure.step_failure_data.user_failure_data.metadata["marin/error"].value.count("broken_step") >= 1
