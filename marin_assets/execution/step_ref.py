"""Marin's step-defining decorator: ``from marin.execution import step, deferred, output, StepContext, StepRef``.

Marin scripts define steps in two ways besides ``ExecutorStep(...)``; both build the same
:class:`~marin_assets.execution.step.ExecutorStep` (so the version and the hash are Marin's rule,
unchanged):

* a config function that receives a :class:`StepContext`::

      @step(name="tokenize/fineweb", fn=tokenize)
      def tokenize_fineweb(ctx: StepContext):
          return TokenizeConfig(train_paths=[ctx.require(download) / "train"], cache_path=ctx.output)

      tokenize_step = tokenize_fineweb()

* a body that returns a *deferred call* of a step function::

      download_hf = deferred(_download_hf)

      @step(name="raw/open-web-math")
      def open_web_math():
          return download_hf(DownloadConfig(..., gcs_output_path=output()))

      raw = open_web_math(override_output_path="raw/open-web-math-fde8ef8")

A body that returns steps it built itself (``default_train(...)``, as Marin's tutorials wrap their
whole pipeline in ``@step(name=".../all")``) returns them unchanged: the name labels the group and
adds no step of its own, so the steps keep the hashes they have without the decorator.

``StepRef`` is :class:`~marin_assets.execution.step.InputName` (``ref / "sub"``, ``.nonblocking()``,
``StepRef.hardcoded(path)`` -- a relative hardcoded path is under the prefix, as everywhere here).
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from marin_assets.execution.step import (
    ExecutorStep,
    InputName,
    OutputName,
    StepResources,
    output_path_of,
    this_output_path,
)

StepRef = InputName


def output(subpath: str | None = None) -> OutputName:
    """The output path of the step being defined (``subpath`` inside it): Marin's ``output()``."""
    return this_output_path(subpath)


@dataclass
class StepContext:
    """Collects what a config function depends on (Marin's ``StepContext``)."""

    dependencies: list[ExecutorStep] = field(default_factory=list)
    pseudo_dependencies: list[ExecutorStep] = field(default_factory=list)

    def require(self, dep: ExecutorStep | InputName) -> InputName:
        """A blocking dependency: the path of ``dep``'s output."""
        ref = dep if isinstance(dep, InputName) else output_path_of(dep)
        if ref.step is not None and ref.step not in self.dependencies:
            self.dependencies.append(ref.step)
        return ref

    def require_nonblocking(self, dep: ExecutorStep | InputName) -> InputName:
        """A dependency that enters the version without being waited for."""
        ref = (dep if isinstance(dep, InputName) else output_path_of(dep)).nonblocking()
        if ref.step is not None and ref.step not in self.pseudo_dependencies:
            self.pseudo_dependencies.append(ref.step)
        return ref

    @property
    def output(self) -> OutputName:
        """This step's own output path."""
        return this_output_path()

    def output_subpath(self, subpath: str) -> OutputName:
        """A path inside this step's own output."""
        return this_output_path(subpath)


@dataclass(frozen=True)
class DeferredCall:
    """``fn(config)`` recorded instead of run: the step ``@step`` builds calls it with the resolved config."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def config(self, step_name: str) -> Any:
        """The single config the step function takes (Marin's steps take one)."""
        if len(self.args) == 1 and not self.kwargs:
            return self.args[0]
        raise TypeError(
            f"step {step_name!r}: {getattr(self.fn, '__name__', self.fn)} was called with "
            f"{len(self.args)} positional and {len(self.kwargs)} keyword argument(s); a step function takes "
            "exactly one config"
        )


def deferred(fn: Callable[..., Any]) -> Callable[..., DeferredCall]:
    """Mark a step function so that calling it inside a ``@step`` body records the call (Marin's)."""

    @functools.wraps(fn)
    def record(*args: Any, **kwargs: Any) -> DeferredCall:
        return DeferredCall(fn=fn, args=args, kwargs=kwargs)

    record.__wrapped__ = fn
    return record


def _takes_context(body: Callable[..., Any], args: Sequence[Any]) -> bool:
    """Whether ``body`` expects a :class:`StepContext` first (annotated so, or named ``ctx``/``context``)."""
    try:
        params = list(inspect.signature(body).parameters.values())
    except (TypeError, ValueError):
        return False
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        return False
    first = params[0]
    annotation = first.annotation
    if annotation is StepContext or annotation == "StepContext":
        return True
    return first.name in ("ctx", "context") and not (args and isinstance(args[0], StepContext))


def step(
    name: str,
    *,
    fn: Callable[..., Any] | None = None,
    description: str | None = None,
    resources: StepResources | None = None,
    pip_dependency_groups: list[str] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Marin's ``@step(name=...)``: the decorated function, called, returns the step it defines.

    The call accepts the body's own arguments plus ``override_output_path=``. See the module
    docstring for the three shapes of body.
    """

    def decorator(body: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(body)
        def make_step(*args: Any, override_output_path: str | None = None, **kwargs: Any) -> Any:
            call_args = (StepContext(), *args) if _takes_context(body, args) else args
            result = body(*call_args, **kwargs)
            if isinstance(result, ExecutorStep | InputName) or (
                isinstance(result, list | tuple) and result and all(isinstance(r, ExecutorStep) for r in result)
            ):
                return result  # steps the body built: the name labels them, adds no step
            if isinstance(result, DeferredCall):
                step_fn, config = result.fn, result.config(name)
            else:
                if fn is None:
                    raise TypeError(
                        f"@step(name={name!r}) returned a config but names no fn=; pass fn= or return a "
                        "deferred call (deferred(function)(config))"
                    )
                step_fn, config = fn, result
            return ExecutorStep(
                name=name,
                fn=step_fn,
                config=config,
                description=description,
                override_output_path=override_output_path,
                pip_dependency_groups=pip_dependency_groups,
                resources=resources,
            )

        return make_step

    return decorator


class _CallableStepModule(types.ModuleType):
    """The module :mod:`marin_assets.execution.step`, callable as Marin's ``step`` decorator.

    Marin's ``marin.execution`` exports a decorator named ``step`` while this package has a
    submodule of that name. Both work: ``from marin.execution import step`` gives the module, and
    ``@step(name=...)`` calls :func:`step` here; attribute access
    (``marin_assets.execution.step.ExecutorStep``) is the module's as before. Set here, where the
    decorator lives, so that ``step`` imports nothing of this module (the package imports this
    module, so any import of ``marin_assets.execution.step`` finds it callable).
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return step(*args, **kwargs)


sys.modules[ExecutorStep.__module__].__class__ = _CallableStepModule
