"""lm-eval task data, offline: below both ``training`` (in-training evals) and ``evaluation`` (the step).

* :mod:`.task_data`: task specs from ``EvalTaskConfig`` s or names, the include folder of the shipped
  tasks (``eval_tasks/``) and ``$MARIN_EVAL_TASKS_PATH``, the offline check and its error message;
* :mod:`.lm_eval_main`: the lm-eval subprocess the evaluation step starts
  (``python -m marin_assets.eval_data.lm_eval_main SPEC.json``) and the task building both share.

It imports the engine (``execution``) and the hub mirror (``download``) only, never training or
evaluation, so either may import it.
"""
