"""A data mixture in Marin's style: two sources referenced by name, versioned weights, and a
step that reads one source twice (Marin counts each reference: DEP[0], DEP[1], DEP[2])."""

import json
import os
from dataclasses import dataclass, field

from marin.execution.executor import (
    THIS_OUTPUT_PATH,
    ExecutorStep,
    InputName,
    ensure_versioned,
    executor_main,
    output_path_of,
    unwrap_versioned_value,
    versioned,
)


@dataclass(frozen=True)
class SourceConfig:
    text: str
    output_path: str = THIS_OUTPUT_PATH


def write_source(config: SourceConfig):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "docs.jsonl"), "w") as f:
        f.write(json.dumps({"text": config.text}) + "\n")


@dataclass(frozen=True)
class Shape:
    layers: int
    width: int


@dataclass(frozen=True)
class MixtureConfig:
    components: dict
    weights: dict
    shape: Shape
    validation: list = field(default_factory=list)
    output_path: str = THIS_OUTPUT_PATH


def mix(config: MixtureConfig):
    total = sum(config.weights.values())
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "mixture.json"), "w") as f:
        json.dump({name: config.weights.get(name, 0) / total for name in config.components}, f)


web = ExecutorStep(name="mixture/web", fn=write_source, config=SourceConfig(text=versioned("web text")))
code = ExecutorStep(name="mixture/code", fn=write_source, config=SourceConfig(text=versioned("def f(): pass")))

weights = ensure_versioned({"web": 0.7, "code": 0.3})
assert unwrap_versioned_value(weights)["web"] == 0.7

mixture = ExecutorStep(
    name="mixture/mix",
    fn=mix,
    config=MixtureConfig(
        components={"web": output_path_of(web, "docs.jsonl"), "code": code},
        weights=weights,
        shape=versioned(Shape(layers=2, width=32)),
        validation=[output_path_of(web), InputName.hardcoded("gs://marin-public/validation/fixed")],
    ),
)

if __name__ == "__main__":
    executor_main(steps=[output_path_of(mixture)])
