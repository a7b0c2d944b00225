"""A failing step with dependents: ``flaky`` fails unless $CONFORMANCE_FIX is set; ``after_flaky``
depends on it; ``independent`` does not."""

import os
from dataclasses import dataclass

from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path, versioned


@dataclass(frozen=True)
class StepConfig:
    output_path: str
    label: str
    upstream: str | None = None


def ok(config: StepConfig):
    os.makedirs(config.output_path, exist_ok=True)
    with open(os.path.join(config.output_path, "done.txt"), "w") as f:
        f.write(config.label)


def flaky(config: StepConfig):
    if not os.environ.get("CONFORMANCE_FIX"):
        raise RuntimeError("flaky step failed on purpose")
    ok(config)


base = ExecutorStep(
    name="failing/base", fn=ok, config=StepConfig(output_path=this_output_path(), label=versioned("base"))
)
flaky_step = ExecutorStep(
    name="failing/flaky",
    fn=flaky,
    config=StepConfig(output_path=this_output_path(), label=versioned("flaky"), upstream=output_path_of(base)),
)
after_flaky = ExecutorStep(
    name="failing/after_flaky",
    fn=ok,
    config=StepConfig(output_path=this_output_path(), label=versioned("after"), upstream=output_path_of(flaky_step)),
)
independent = ExecutorStep(
    name="failing/independent",
    fn=ok,
    config=StepConfig(output_path=this_output_path(), label=versioned("independent"), upstream=output_path_of(base)),
)

if __name__ == "__main__":
    executor_main(steps=[after_flaky, independent])
