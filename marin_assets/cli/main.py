"""``marin COMMAND ...``: the subcommands, each dispatched to the ``main(argv)`` of the module doing the work.

The modules are imported only when their subcommand runs (by the module paths ``python -m`` names,
which keep working), so ``marin --help`` is quick and a module that moves breaks one subcommand, not
the command. A module's ``main(argv, prog=...)`` is passed ``marin COMMAND`` as the program its usage
and errors name (its default is its ``python -m`` line); for a ``main(argv)`` without ``prog``,
``sys.argv[0]`` is ``marin COMMAND`` while it parses (argparse's default ``prog``).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import runpy
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

PROG = "marin"
HELP_FLAGS = ("-h", "--help")


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, a line for ``marin --help``, and the ``module:function`` it runs
    (a ``main(argv)`` returning an exit status or None), or a function of this module."""

    name: str
    summary: str
    entry: str | Callable[[list[str]], int | None]

    def run(self, argv: list[str]) -> int:
        if callable(self.entry):
            target = self.entry
        else:
            module, _, function = self.entry.partition(":")
            target = getattr(importlib.import_module(module), function)
        prog = f"{PROG} {self.name}"
        # A main(argv, prog=...) is told its program; for one without, argparse's default prog
        # (sys.argv[0]) names it.
        takes_prog = "prog" in inspect.signature(target).parameters
        with _program_name(prog):
            status = target(argv, prog=prog) if takes_prog else target(argv)
        return int(status or 0)


@contextmanager
def _program_name(name: str) -> Iterator[None]:
    """``sys.argv[0]`` as ``name`` while a module parses (argparse's default ``prog``)."""
    saved = sys.argv[:]
    sys.argv[0:1] = [name]
    try:
        yield
    finally:
        sys.argv[:] = saved


def executor_flags_help(description: str, prog: str) -> str:
    """The help of ``executor_main``'s flags, generated from ``ExecutorMainConfig``."""
    from marin_assets.execution.executor_main import build_parser

    return build_parser(description, prog=prog).format_help()


RUN_OPTIONS_HELP = (
    "marin run options (before SCRIPT; everything after SCRIPT is the script's):\n"
    "  -v, --verbose         every library's log lines on the console, also those of recording the run in\n"
    "                        Dagster (alembic, SQLAlchemy): sets $MARIN_VERBOSE=1 for the run\n"
)
VERBOSE_FLAGS = ("-v", "--verbose")


def run_script(argv: list[str]) -> int:
    """``marin run [-v] SCRIPT [FLAGS...]``: run an experiment script as ``python SCRIPT`` (or ``python -m``) would."""
    verbose = False
    while argv and argv[0] in VERBOSE_FLAGS:
        verbose, argv = True, argv[1:]
    if not argv or argv[0] in HELP_FLAGS:
        print(
            executor_flags_help(
                "Run an experiment script: a file (experiments/x.py) or a module (marin_assets.experiments."
                "hello_world), as `python SCRIPT FLAGS` / `python -m MODULE FLAGS` would. Its executor_main "
                "reads the flags below (Marin's, parsed by draccus: `--dry_run true`, `--run_only "
                '"[a, b]"`); a script passes any others to its own parser. Other libraries\' INFO lines '
                "(alembic, SQLAlchemy, Dagster) go to the run's log file only, unless -v. Exit status: the "
                "script's (1: steps failed; 2: the run could not be recorded in the Dagster instance).",
                f"{PROG} run [-v] SCRIPT",
            ),
            end="",
        )
        print(f"\n{RUN_OPTIONS_HELP}", end="")
        return 0 if argv else 2
    if verbose:
        from marin_assets.execution.run_log import VERBOSE_ENV

        os.environ[VERBOSE_ENV] = "1"  # read by the run's log set-up (run_log.verbose_requested)
    target, flags = argv[0], argv[1:]
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    try:
        if target.endswith(".py") or os.sep in target or os.path.isfile(target):
            path = os.path.abspath(target)
            if not os.path.isfile(path):
                print(f"{PROG} run: no such script: {target}", file=sys.stderr)
                return 2
            sys.argv[:] = [path, *flags]
            sys.path.insert(0, os.path.dirname(path))  # as `python SCRIPT` does
            runpy.run_path(path, run_name="__main__")
        else:
            sys.argv[:] = [target, *flags]
            sys.path.insert(0, os.getcwd())  # as `python -m MODULE` does
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path
    return 0


def quickstart(argv: list[str]) -> int:
    """``marin quickstart``: the quickstart pipeline (``marin_assets.experiments.quickstart``)."""
    if any(arg in HELP_FLAGS for arg in argv):
        # The quickstart's own flags are read before executor_main's (which print below); the choices
        # of --size come from the module.
        from marin_assets.experiments.quickstart_steps import SIZES

        print(
            f"usage: {PROG} quickstart [--size {{{','.join(sorted(SIZES))}}}] [-v] [--stop_ray] "
            "[--sample_drops N] [--sample_docs N] [executor_main flags]\n\n"
            "Write the sample HTML drops (when missing), then curate them, train the tokenizer, build the "
            "token caches, train a tiny Llama on CPU and evaluate it; prints a summary. Running it again "
            "recomputes nothing.\n\n"
            "quickstart options:\n"
            "  --size SIZE         model size (default: tiny; test: a much smaller one)\n"
            "  -v, --verbose       every log line (engine, Dagster, Ray)\n"
            "  --stop_ray          stop the embedded Ray head at the end (scripts/quickstart.sh)\n"
            "  --sample_drops N    sample drops to make sure exist (default: 3; 0: none)\n"
            "  --sample_docs N     documents per sample drop\n"
        )
        print(executor_flags_help("executor_main flags:", f"{PROG} quickstart").split("\n\n", 1)[1], end="")
        return 0
    from marin_assets.experiments.quickstart import main as quickstart_main

    return int(quickstart_main(argv) or 0)


def ray(argv: list[str]) -> int:
    """``marin ray stop``: stop this machine's embedded Ray head."""
    parser = argparse.ArgumentParser(
        prog=f"{PROG} ray",
        description="The embedded Ray head that steps share on this machine when $RAY_ADDRESS is unset.",
    )
    actions = parser.add_subparsers(dest="action", required=True)
    stop = actions.add_parser(
        "stop",
        help="stop the embedded Ray head (only its own processes; other Ray clusters are left alone)",
        description="Stop the embedded Ray head started in the temp dir (its processes only; never `ray stop`, "
        "which would stop every Ray cluster of the machine).",
    )
    stop.add_argument(
        "--temp_dir", default=None, help="the head's temp dir (default: $MARIN_RAY_TMPDIR, else /tmp/marin-ray-UID)"
    )
    args = parser.parse_args(argv)
    from marin_resources.ray_head import default_temp_dir, stop_embedded_head

    temp_dir = os.path.abspath(args.temp_dir or default_temp_dir())
    stop_embedded_head(temp_dir)
    print(f"embedded Ray head of {temp_dir}: stopped (no process of it is left)")
    return 0


COMMANDS: tuple[Command, ...] = (
    Command(
        "run", "run an experiment script (executor_main's flags: --dry_run true, --prefix, --run_only ...)", run_script
    ),
    Command("quickstart", "the quickstart: sample drops to an evaluated model", quickstart),
    Command(
        "invalidate", "mark a step and its descendants for recomputation", "marin_assets.execution.invalidate:main"
    ),
    Command("gc", "remove step outputs that no experiment references", "marin_assets.execution.gc:main"),
    Command("browse", "serve the read-only data browser of a prefix", "marin_assets.browse.__main__:main"),
    Command("sample-drop", "write sample data drops into a landing zone", "marin_assets.experiments.sample_data:main"),
    Command(
        "manifest", "write a drop folder's manifest.json (last), completing the drop", "marin_assets.landing.zone:main"
    ),
    Command(
        "ray-run",
        "run an experiment on a Ray cluster as a Ray job; list | logs JOB | stop JOB",
        "marin_assets.run.ray_run:main",
    ),
    Command(
        "deploy",
        "the production topology on one machine: up | down | status | env | reload | restart-code",
        "marin_resources.deploy.local:main",
    ),
    Command("ray", "the embedded Ray head: stop", ray),
)


def build_parser() -> argparse.ArgumentParser:
    """``marin --help``: the subcommands (each one's ``--help`` is its documentation)."""
    width = max(len(c.name) for c in COMMANDS)
    listing = "\n".join(f"  {c.name:<{width}}  {c.summary}" for c in COMMANDS)
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} COMMAND [ARGS...]",
        description="Marin's reproducible LM research pipeline on Dagster: the commands a user starts.",
        epilog=f"commands:\n{listing}\n\n`{PROG} COMMAND --help` documents each one.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=[c.name for c in COMMANDS], metavar="COMMAND")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the command's arguments")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``marin`` console script; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0] in HELP_FLAGS:
        parser.print_help()
        return 0 if args else 2
    if args[0] not in {c.name for c in COMMANDS}:
        parser.error(f"unknown command {args[0]!r} (choose from {', '.join(c.name for c in COMMANDS)})")
    command = next(c for c in COMMANDS if c.name == args[0])
    return command.run(args[1:])
