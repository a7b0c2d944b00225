"""bench/location_load runs end to end: every webserver lists every asset, phases are reported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_location_load_bench_times_both_sides_and_their_phases():
    out = subprocess.run(
        [sys.executable, "-m", "bench.location_load", "--steps", "200", "--scripts", "1", "20", "--phases"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=True,
    ).stdout
    rows = re.findall(r"(\d+) steps / +(\d+) script\(s\): ours +([\d.]+) s +plain +([\d.]+) s +ratio ([\d.]+)", out)
    assert [(r[0], r[1]) for r in rows] == [("200", "1"), ("200", "20")], out
    for _, _, ours, plain, ratio in rows:
        ours_s, plain_s = float(ours), float(plain)
        assert ours_s > 0 and plain_s > 0
        # Seconds print rounded to 0.1 s, the ratio to 0.01, from the unrounded times.
        assert (ours_s - 0.05) / (plain_s + 0.05) - 0.005 <= float(ratio) <= (ours_s + 0.05) / (plain_s - 0.05) + 0.005
    baseline = re.findall(
        r"(\d+) steps / +(\d+) script\(s\): plain materializable .* ([\d.]+) s, ours / materializable ([\d.]+)", out
    )
    assert [(r[0], r[1]) for r in baseline] == [("200", "1"), ("200", "20")], out
    cpu = re.findall(
        r"CPU s \(webserver \+ code server\): ours +([\d.]+) +plain +([\d.]+) +materializable +([\d.]+)", out
    )
    assert len(cpu) == 2 and all(float(v) > 0 for row in cpu for v in row), out
    phases = re.findall(
        r"^ +(ours|plain|materializable): import dagster [\d.]+ s +definitions ([\d.]+) s .* MB ([\d.]+)$",
        out,
        flags=re.M,
    )
    assert [p[0] for p in phases] == ["ours", "plain", "materializable"] * 2, out
    assert all(float(p[2]) > 0 for p in phases)
