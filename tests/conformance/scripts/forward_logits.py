"""Marin's experiments/tutorials/exp1350_forward_logits.py shape (its hub model and gs:// book)."""

from marin.execution.executor import ExecutorStep, executor_main, this_output_path
from marin.generation.logits import TextLogitsConfig, compute_logits

logits_step = ExecutorStep(
    name="tutorials/forward-logits",
    fn=compute_logits,
    config=TextLogitsConfig(
        model_name="meta-llama/Meta-Llama-3.1-8B",
        input_path="books/gatsby.txt",
        output_path=this_output_path(),
        batch_size=8,
        memory_gb=16,
        span_chars=4096,
    ),
)

if __name__ == "__main__":
    executor_main([logits_step])
