"""What the training subprocess adds to Levanter's trainer: a checkpoint at the last step, and on SIGTERM.

Levanter 1.2.dev1644 ends ``Trainer.train`` with ``run_hooks(info, force=True)``, but its checkpointer
is registered as a plain function (``add_hook(checkpointer.on_step)``), which Levanter wraps in a
``LambdaCallback`` that drops ``force``: the last step is checkpointed only when it happens to be a
multiple of ``steps_per_export``. A finished run could then not be continued from its final state.
:func:`install` wraps ``Trainer.train`` so the checkpointer itself is forced at the end and waited
for, whatever the export interval; a step already saved is not written twice.

SIGTERM (a preemption, or a runner cancelling the step): on a single-process run the next step
boundary saves a checkpoint of the step just completed and the process exits with 143, so the next
attempt resumes from there. On a multi-host slice a save is a collective every host must join, and
only the hosts that received the signal would join it, so there SIGTERM keeps Python's default
(exit at once; the next attempt resumes from the last periodic checkpoint).

Runs in the training subprocess only (:func:`marin_assets.training.levanter_config.prepare_training`
calls :func:`install`): it imports Levanter and JAX.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

SIGTERM_EXIT_CODE = 128 + signal.SIGTERM
_terminate = threading.Event()
_installed = False


def checkpointer_of(trainer: Any) -> Any:
    """The ``Checkpointer`` Levanter registered as a hook of ``trainer`` (None when there is none)."""
    from levanter.checkpoint import Checkpointer

    for hook in trainer.hooks.hooks:
        owner = getattr(getattr(hook.fn, "fn", None), "__self__", None)
        if isinstance(owner, Checkpointer):
            return owner
    return None


def save_checkpoint_now(trainer: Any, info: Any, why: str) -> None:
    """Force a checkpoint of ``info``'s step (unless that step is already saved) and wait until it is written."""
    checkpointer = checkpointer_of(trainer)
    if checkpointer is None:
        logger.warning("no checkpointer among the trainer's hooks: step %d is not checkpointed (%s)", info.step, why)
        return
    if checkpointer._last_save_step != info.step:  # Levanter's own record of the step it saved last
        logger.info("marin: saving the checkpoint of step %d (%s)", info.step, why)
        checkpointer.on_step(info, force=True)
    checkpointer.wait_until_finished()


def _on_sigterm(signum: int, frame: Any) -> None:
    logger.warning("marin: SIGTERM received: checkpointing at the next step boundary, then exiting")
    _terminate.set()


def install() -> None:
    """Wrap Levanter's ``Trainer.train`` / ``training_steps`` (idempotent)."""
    global _installed
    if _installed:
        return
    import jax
    from levanter.trainer import Trainer

    original_train = Trainer.train
    original_steps = Trainer.training_steps

    def train(self: Trainer, state: Any, train_loader: Any) -> Any:
        info = original_train(self, state, train_loader)
        save_checkpoint_now(self, info, "last step")
        return info

    def training_steps(self: Trainer, state: Any, train_loader: Any) -> Iterator[Any]:
        for info in original_steps(self, state, train_loader):
            yield info
            if _terminate.is_set():
                save_checkpoint_now(self, info, "SIGTERM")
                logger.warning("marin: checkpoint of step %d written after SIGTERM; exiting", info.step)
                raise SystemExit(SIGTERM_EXIT_CODE)

    Trainer.train = train
    Trainer.training_steps = training_steps
    _installed = True

    def arm_sigterm() -> None:
        # After Levanter initialized jax.distributed (process_count is only known then).
        if jax.process_count() == 1 and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _on_sigterm)

    original_init = Trainer.__init__

    def init(self: Trainer, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        arm_sigterm()

    Trainer.__init__ = init
