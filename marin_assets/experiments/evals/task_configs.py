"""Marin's ``experiments/evals/task_configs.py``: lm-eval task lists as ``EvalTaskConfig`` tuples.

Same names and contents as Marin's for the lists below (``LONG_CONTEXT_TASKS``: the 13 RULER tasks
Marin's long-context scripts pass to ``default_eval``). Their data are Hugging Face datasets: here
they run when the data is in the local Hugging Face cache, and otherwise fail before evaluating
with an error naming the task and how to make it available (nothing is downloaded). ``LOCAL_TASKS``
are this project's tasks shipped as task YAML with their data (``marin_assets/eval_data/eval_tasks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marin_assets.evaluation.evaluation_config import EvalTaskConfig

CORE_TASKS = (
    EvalTaskConfig("agieval_lsat_ar", 3),
    EvalTaskConfig("arc_easy", 10),
    EvalTaskConfig("arc_challenge", 10),
    EvalTaskConfig("boolq", 10),
    EvalTaskConfig("commonsense_qa", 10),
    EvalTaskConfig("copa", 0),
    EvalTaskConfig("hellaswag", 0, task_alias="hellaswag_0shot"),
    EvalTaskConfig("hellaswag", 10, task_alias="hellaswag_10shot"),
    EvalTaskConfig("lambada_openai", 0),
    EvalTaskConfig("openbookqa", 0),
    EvalTaskConfig("piqa", 10),
    EvalTaskConfig("wsc273", 0),
    EvalTaskConfig("winogrande", 0),
)

MMLU_0_SHOT = EvalTaskConfig("mmlu", 0, task_alias="mmlu_0shot")
MMLU_5_SHOT = EvalTaskConfig("mmlu", 5, task_alias="mmlu_5shot")
MMLU_PRO_5_SHOT = EvalTaskConfig("leaderboard_mmlu_pro", 5, task_alias="mmlu_5shot")
MMLU_TASKS = (MMLU_0_SHOT, MMLU_5_SHOT)

OPEN_LM_LEADERBOARD_MCQ = (
    EvalTaskConfig("leaderboard_bbh", 3, task_alias="lb_bbh_3shot"),
    EvalTaskConfig("leaderboard_mmlu_pro", 5, task_alias="lb_mmlu_pro_5shot"),
    EvalTaskConfig("leaderboard_gpqa", 0, task_alias="lb_gpqa_0shot"),
    EvalTaskConfig("leaderboard_musr", 0, task_alias="lb_musr_0shot"),
)
OPEN_LM_LEADERBOARD_GEN = (
    EvalTaskConfig("leaderboard_ifeval", 0, task_alias="lb_ifeval_0shot"),
    EvalTaskConfig("leaderboard_math_hard", 4, task_alias="lb_math_4shot"),
)

CORE_TASKS_PLUS_LEADERBOARD = (
    EvalTaskConfig("leaderboard_bbh", 3, task_alias="bbh_3shot"),
    EvalTaskConfig("leaderboard_gpqa", 0, task_alias="gpqa_0shot"),
    *CORE_TASKS,
)
CORE_TASKS_PLUS_MMLU = CORE_TASKS + MMLU_TASKS

BASE_GENERATION_TASKS = (
    EvalTaskConfig(name="bbh_cot_fewshot", num_fewshot=3),
    EvalTaskConfig(name="gsm8k_cot", num_fewshot=8),
    EvalTaskConfig(name="nq_open", num_fewshot=0, task_alias="nq_open"),
    EvalTaskConfig(name="triviaqa", num_fewshot=0, task_alias="triviaqa"),
)
KEY_GENERATION_TASKS = (
    EvalTaskConfig(name="ifeval", num_fewshot=0),
    EvalTaskConfig(name="gsm8k_cot", num_fewshot=8),
    EvalTaskConfig(name="drop", num_fewshot=0),
    EvalTaskConfig(name="humaneval", num_fewshot=10),
    EvalTaskConfig(name="bbh_cot_fewshot", num_fewshot=3, task_alias="bbh"),
    EvalTaskConfig(name="minerva_math", num_fewshot=4, task_alias="math_4shot"),
)
KEY_MULTIPLE_CHOICE_TASKS = (
    EvalTaskConfig("mmlu", 0, task_alias="mmlu_0shot"),
    EvalTaskConfig("mmlu", 5, task_alias="mmlu_5shot"),
    EvalTaskConfig(name="truthfulqa_mc2", num_fewshot=6, task_alias="truthqa"),
)

PUBMED_QA = EvalTaskConfig("pubmedqa", 0, task_alias="pubmedqa_0shot")
MEDMCQA = EvalTaskConfig("medmcqa", 0, task_alias="medmcqa_0shot")
HEADQA = EvalTaskConfig("headqa_en", 0, task_alias="headqa_en_0shot")
MEDICAL_TASKS = (PUBMED_QA, MEDMCQA, HEADQA)

# RULER (lm-eval's 13-task ``ruler`` group, by task): synthetic long-context prompts, what Marin's
# ``run_ruler_evals.py`` scripts evaluate. Their prompts are generated with the model's tokenizer at
# ``max_seq_lengths`` (lm-eval's default 4096) from essays and SQuAD/HotpotQA, which must be local.
LONG_CONTEXT_TASKS = (
    EvalTaskConfig("niah_single_1", 0),
    EvalTaskConfig("niah_single_2", 0),
    EvalTaskConfig("niah_single_3", 0),
    EvalTaskConfig("niah_multikey_1", 0),
    EvalTaskConfig("niah_multikey_2", 0),
    EvalTaskConfig("niah_multikey_3", 0),
    EvalTaskConfig("niah_multiquery", 0),
    EvalTaskConfig("niah_multivalue", 0),
    EvalTaskConfig("ruler_vt", 0),
    EvalTaskConfig("ruler_cwe", 0),
    EvalTaskConfig("ruler_fwe", 0),
    EvalTaskConfig("ruler_qa_squad", 0),
    EvalTaskConfig("ruler_qa_hotpot", 0),
)

# Ours: shipped with their data (task YAML + jsonl), so they run anywhere offline.
LOCAL_TASKS = (
    EvalTaskConfig("marin_docstring_mc", 0),
    EvalTaskConfig("marin_docstring_cloze", 0),
    EvalTaskConfig("marin_docstring_ppl", 0),
)


def convert_to_levanter_task_config(tasks: Sequence[EvalTaskConfig]) -> list[Any]:
    """Levanter's ``TaskConfig`` for each task (imports Levanter)."""
    from levanter.eval_harness import TaskConfig

    return [TaskConfig(task=t.name, num_fewshot=t.num_fewshot, task_alias=t.task_alias) for t in tasks]


def convert_to_task_metrics(tasks: Sequence[EvalTaskConfig], metric: str) -> list[str]:
    """The tracker keys Levanter logs for ``metric`` of each task: ``lm_eval/<alias or name>/<metric>``."""
    if not tasks:
        raise ValueError("Tasks sequence cannot be empty")
    for task in tasks:
        if not isinstance(task, EvalTaskConfig):
            raise TypeError(f"Expected task to be EvalTaskConfig, got {type(task)}")
    return [f"lm_eval/{task.task_alias or task.name}/{metric}" for task in tasks]
