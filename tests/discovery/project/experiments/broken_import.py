"""An experiment script that fails on import (a missing config, a typo): the other scripts still load."""

from __future__ import annotations

raise RuntimeError("broken on purpose: the dataset config this script needs is missing")
