"""A team repository gets landing sensors from its own declarations (issue 29.5, sensor part): the
worked example of docs/curation.md ("Landing sensors of a team repository"), loaded as the code
location loads it, its sensor fed the prefix by the storage resource. Fast."""

from __future__ import annotations

import sys
import textwrap

import dagster as dg

from marin_assets.definitions import build_definitions
from marin_assets.execution.discovery import discover
from marin_assets.experiments.sample_data import SampleConfig, write_drop
from marin_resources.dagster_resources import MarinStorageResource

TEAM_SCRIPT = '''
"""Our web crawl: every drop of <prefix>/landing/team-web becomes a partition, one run per drop."""

from marin_assets.execution.declarations import Experiment
from marin_assets.execution.step import ExecutorStep, this_output_path, this_partition
from marin_assets.landing.zone import LandingDrops
from marin_assets.transform.raw.process import RawConfig, run_raw

CRAWL = LandingDrops("landing/team-web")  # the landing zone this script reads

raw = ExecutorStep(
    name="team/web_raw",
    fn=run_raw,
    config=RawConfig(landing_dir="landing/team-web", drop_id=this_partition(), output_path=this_output_path()),
    partitioned_by="team-web",
    partition_source=CRAWL,  # declares where the partition keys come from: the location adds the sensor
)
EXPERIMENT = Experiment(steps=[raw], description="The team's web crawl, drop by drop")
'''


def test_team_repository_gets_its_landing_sensor(tmp_path, monkeypatch, dagster_home):
    project = tmp_path / "team"
    (project / "experiments").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.marin]\nexperiments = ["experiments/*.py"]\n')
    (project / "experiments" / "team_web.py").write_text(textwrap.dedent(TEAM_SCRIPT))
    prefix = str(tmp_path / "data")
    monkeypatch.setenv("MARIN_PROJECT_ROOT", str(project))
    monkeypatch.setenv("MARIN_PREFIX", str(tmp_path / "elsewhere"))  # the resource decides, not the env
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "experiments", raising=False)
    monkeypatch.delitem(sys.modules, "experiments.team_web", raising=False)

    defs = build_definitions(scripts=discover())
    sensor = defs.resolve_sensor_def("landing_sensor_team_web")
    assert {s.name for s in defs.sensors} >= {"landing_sensor_team_web", "landing_status"}
    assert defs.resolve_job_def("team_web_drop_job") is not None

    write_drop(prefix, "drop-001", SampleConfig(docs_per_drop=5), "team-web")
    with dg.DagsterInstance.get() as instance:
        resources = {"marin_storage": MarinStorageResource(prefix=prefix)}
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert [r.partition_key for r in result.run_requests] == ["drop-001"]
    assert result.run_requests[0].tags["marin/curation"] == "team-web"
