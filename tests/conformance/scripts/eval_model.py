"""Marin's CPU eval tutorial shape (``experiments/tutorials/eval_tiny_model_cpu.py``): an
``EvaluationConfig`` step run by ``evaluate`` on a local HF model folder, plus ``default_eval`` on the
same folder -- lm-eval tasks given as local task YAML (shipped with their data), offline."""

from experiments.evals.evals import default_eval
from experiments.evals.task_configs import LOCAL_TASKS
from marin.evaluation.evaluation_config import EvalTaskConfig, EvaluationConfig
from marin.evaluation.run import evaluate
from marin.execution.executor import ExecutorStep, executor_main, this_output_path

MODEL_PATH = "local_model"  # an HF model folder (config.json + weights + tokenizer)

tiny_eval = ExecutorStep(
    name="tutorials/eval_tiny_model_cpu/local_tasks",
    fn=evaluate,
    config=EvaluationConfig(
        evaluator="lm_evaluation_harness_hf",
        model_name="tiny-cpu",
        model_path=MODEL_PATH,
        evaluation_path=this_output_path(),
        evals=[EvalTaskConfig("marin_docstring_mc", 0)],
        max_eval_instances=4,
        launch_with_ray=False,
        discover_latest_checkpoint=False,
    ),
    pip_dependency_groups=["cpu", "eval"],
)

default_tiny_eval = default_eval(MODEL_PATH, evals=[LOCAL_TASKS[2]], max_eval_instances=4)

if __name__ == "__main__":
    executor_main(steps=[tiny_eval, default_tiny_eval])
