"""Ships ``marin_alias.pth`` next to the packages (the metadata is in ``pyproject.toml``).

The ``.pth`` file installs :class:`marin_alias.MarinAliasFinder` at interpreter start,
so Marin's ``marin.*``, ``fray.cluster`` and ``experiments.*`` names resolve to this project (real
Marin wins when installed). A ``.pth`` file must sit at the top of ``site-packages``, which
``pyproject.toml`` alone cannot express: ``build_py`` adds it to a wheel, ``editable_wheel`` to an
editable install (``pip install -e .``).
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH_NAME = "marin_alias.pth"
# One line: site.py executes lines that start with "import".
PTH_LINE = "import marin_alias as _marin_alias; _marin_alias.install()\n"


def _write_pth(folder: str) -> str:
    path = os.path.join(folder, PTH_NAME)
    os.makedirs(folder, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(PTH_LINE)
    return path


class BuildPyWithPth(build_py):
    """``build_py`` that also puts the ``.pth`` file at the root of the wheel."""

    def run(self) -> None:
        super().run()
        _write_pth(self.build_lib)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH_NAME)]


class EditableWheelWithPth(editable_wheel):
    """``editable_wheel`` whose wheel also carries the ``.pth`` file (everything written into the
    unpacked folder before the wheel is zipped goes into it)."""

    def _install_namespaces(self, installation_dir: str, pth_prefix: str) -> None:
        super()._install_namespaces(installation_dir, pth_prefix)
        _write_pth(str(installation_dir))


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
