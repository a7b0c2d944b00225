"""Marin's ``experiments/datashop/datashop_datasets.py``: DCLM-baseline subsets the datashop tutorials label
and filter (same step names and sub-paths). They need the DCLM download: on a machine without it, running
one fails naming the dataset."""

from marin_assets.download.filesystem.transfer import TransferConfig, transfer_files
from marin_assets.execution.step import ExecutorStep, this_output_path
from marin_assets.experiments.pretraining_datasets import dclm_baseline

_DCLM = "huggingface.co/datasets/mlfoundations/dclm-baseline-1.0/resolve/a3b142c"
dclm_baseline_global_shard_2 = dclm_baseline.cd(f"{_DCLM}/global-shard_02_of_10")
dclm_baseline_global_shard_1_local_shard_1 = dclm_baseline.cd(f"{_DCLM}/global-shard_01_of_10/local-shard_0_of_10")

datashop_dclm_annotation_subset = ExecutorStep(
    name="documents/datashop-datasets/datashop-dclm-annotation-subset",
    fn=transfer_files,
    config=TransferConfig(
        input_path=dclm_baseline_global_shard_1_local_shard_1, output_path=this_output_path(), num_random_files=4
    ),
)
datashop_dclm_pretraining_subset = ExecutorStep(
    name="documents/datashop-datasets/datashop-dclm-pretraining-subset",
    fn=transfer_files,
    config=TransferConfig(input_path=dclm_baseline_global_shard_2, output_path=this_output_path()),
)
datashop_dclm_tutorial_subset = ExecutorStep(
    name="documents/datashop-datasets/datashop-dclm-tutorial-subset",
    fn=transfer_files,
    config=TransferConfig(
        input_path=dclm_baseline_global_shard_1_local_shard_1, output_path=this_output_path(), num_random_files=1
    ),
)
# The tutorial's names for its two subsets.
datashop_dclm_tutorial_annotation_subset = datashop_dclm_tutorial_subset
datashop_dclm_tutorial_pretraining_subset = datashop_dclm_tutorial_subset
