"""The ``marin`` command: one entry point for what a user starts (``marin --help`` lists them).

Each subcommand hands its arguments to the ``main(argv)`` of the module that does the work (the
module a ``python -m`` path names, which keeps working), imported only when that subcommand runs:
``marin --help`` imports nothing heavy, and a module's own ``--help`` is the subcommand's help.
"""

from marin_assets.cli.main import COMMANDS, main

__all__ = ["COMMANDS", "main"]
