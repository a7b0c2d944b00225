"""The fence of the step running in this thread: what a lost lease cancels.

While the runner executes a step it *activates* the step's lease here (a context variable, so it
is visible to the step function's own code in the same thread). Code that writes outputs or
starts work elsewhere consults it:

* :func:`check_fence` -- raise :class:`LeaseLostError` when the lease is gone (the engine's
  storage helpers call it before every write, so a resumed zombie cannot write through them);
* :func:`on_lease_lost` -- register a callback that stops outside work when the lease is lost
  (the train/eval subprocess runner kills its process group; Ray launches cancel their task).

Outside a step (tests, scripts, Ray workers) there is no active lease and both are no-ops.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any, Protocol


class LeaseLostError(RuntimeError):
    """This runner's lease on an output was lost (taken over, deleted, or not renewed in time); nothing was recorded."""


class StepCancelled(BaseException):
    """Raised asynchronously inside an in-process step whose lease was lost.

    A BaseException, so that a step's own ``except Exception`` cannot swallow the cancellation.
    """


class Fence(Protocol):
    """What a lease offers to the code running under it."""

    def check(self) -> None:
        """Raise LeaseLostError when the lease is lost or cannot be confirmed."""
        ...

    def on_lost(self, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback`` once if the lease is lost; returns a function that unregisters it."""
        ...


_ACTIVE: contextvars.ContextVar[Fence | None] = contextvars.ContextVar("marin_active_fence", default=None)


@contextlib.contextmanager
def activate(fence: Fence) -> Iterator[None]:
    """Make ``fence`` the active fence of this thread's context while inside."""
    token = _ACTIVE.set(fence)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_fence() -> Fence | None:
    """The fence of the step running in this context, or None."""
    return _ACTIVE.get()


def check_fence() -> None:
    """Raise :class:`LeaseLostError` when the running step's lease is lost (no-op outside a step)."""
    fence = _ACTIVE.get()
    if fence is not None:
        fence.check()


def on_lease_lost(callback: Callable[[], Any]) -> Callable[[], None]:
    """Run ``callback`` if the running step's lease is lost; returns an unregister function."""
    fence = _ACTIVE.get()
    if fence is None:
        return lambda: None
    return fence.on_lost(callback)
