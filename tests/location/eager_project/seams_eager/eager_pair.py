"""A source step and a follower declared eager: the follower is materialized whenever the source is."""

from marin_assets.execution import ExecutorStep, output_path_of, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from tests.execution.sample_steps import WriteConfig, write_value

source = ExecutorStep("seams/source", write_value, WriteConfig(this_output_path(), versioned(1)))
follower = ExecutorStep("seams/follower", write_value, WriteConfig(this_output_path(), inputs=[output_path_of(source)]))

EXPERIMENT = Experiment(steps=[follower], eager_steps=[follower])
