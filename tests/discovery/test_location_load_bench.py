"""bench/location_load runs end to end: every webserver lists every asset, phases are reported, and
the goal's baseline has ours' op structure (one op unwatched; an op per watched step besides)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO_ROOT = Path(__file__).resolve().parents[2]
LABEL = r"(\d+) steps / +(\d+) script\(s\)(?:, every (\d+)th watched)?"


def test_location_load_bench_times_both_sides_and_their_phases():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.location_load",
            "--steps",
            "200",
            "--scripts",
            "1",
            "20",
            "--watched_every",
            "0",
            "50",
            "--phases",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=540,
        check=True,
    ).stdout
    configs = [("200", "1", ""), ("200", "1", "50"), ("200", "20", ""), ("200", "20", "50")]
    rows = re.findall(LABEL + r": ours +([\d.]+) s +plain +([\d.]+) s +ratio ([\d.]+)", out)
    assert [r[:3] for r in rows] == configs, out
    for *_, ours, plain, ratio in rows:
        ours_s, plain_s = float(ours), float(plain)
        assert ours_s > 0 and plain_s > 0
        # Seconds print rounded to 0.1 s, the ratio to 0.01, from the unrounded times.
        assert (ours_s - 0.05) / (plain_s + 0.05) - 0.005 <= float(ratio) <= (ours_s + 0.05) / (plain_s - 0.05) + 0.005
    baseline = re.findall(
        LABEL + r": plain materializable \(200 assets, same (\d+) op\(s\) as ours\) +([\d.]+) s, "
        r"ours / materializable ([\d.]+) \(goal <= 1.3",
        out,
    )
    assert [r[:3] for r in baseline] == configs, out
    ops = {r[:3]: int(r[3]) for r in baseline}
    # Unwatched: every step in one subsettable op. Every 50th of 200 watched: 4 ops of their own
    # and at least one packed op of the cheap steps.
    assert ops[("200", "1", "")] == ops[("200", "20", "")] == 1, out
    assert ops[("200", "1", "50")] == ops[("200", "20", "50")] >= 4 + 1, out
    cpu = re.findall(
        r"CPU s \(webserver \+ code server\): ours +([\d.]+) +plain +([\d.]+) +materializable +([\d.]+)", out
    )
    assert len(cpu) == 4 and all(float(v) > 0 for row in cpu for v in row), out
    phases = re.findall(
        r"^ +(ours|plain|materializable): import dagster [\d.]+ s +definitions ([\d.]+) s .* MB ([\d.]+)$",
        out,
        flags=re.M,
    )
    assert [p[0] for p in phases] == ["ours", "plain", "materializable"] * 4, out
    assert all(float(p[2]) > 0 for p in phases)
