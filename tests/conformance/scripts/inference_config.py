"""A quality classifier applied with Marin's ``classification.config.inference_config`` names:
fastText trained on two local document sets, then ``run_inference`` with ``InferenceConfig``,
``RuntimeConfig`` and ``TaskConfig`` imported from the config module."""

from marin.classifiers.utils import DatasetConfig
from marin.execution.executor import ExecutorStep, executor_main, output_path_of, this_output_path
from marin.processing.classification.config.inference_config import InferenceConfig, RuntimeConfig, TaskConfig
from marin.processing.classification.fasttext.train_fasttext import TrainFasttextClassifierConfig, train
from marin.processing.classification.inference import run_inference

classifier = ExecutorStep(
    name="classifiers/tiny-quality",
    fn=train,
    config=TrainFasttextClassifierConfig(
        datasets=[
            DatasetConfig(input_doc_path="local_docs/hq", label="hq", sampling_rate=1.0),
            DatasetConfig(input_doc_path="local_docs/lq", label="lq", sampling_rate=1.0),
        ],
        output_path=this_output_path(),
        fasttext_args={"lr": 0.1, "minCount": 1, "epoch": 25, "wordNgrams": 2, "dim": 50, "thread": 16},
    ),
)
scores = ExecutorStep(
    name="attributes/tiny-quality",
    fn=run_inference,
    config=InferenceConfig(
        input_path="local_docs/hq",
        output_path=this_output_path(),
        model_name=output_path_of(classifier),
        model_type="fasttext",
        attribute_name="tiny-quality",
        runtime=RuntimeConfig(memory_limit_gb=1),
        task=TaskConfig(max_in_flight=10),
    ),
)

if __name__ == "__main__":
    executor_main(steps=[scores])
