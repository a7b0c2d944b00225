"""Every materialization carries its step's code and data version, whoever ran it (issue 36).

* a run of ``evaluate`` alone brings ``prep``, ``features`` and ``train`` along; after editing
  ``prep``'s ``versioned(1)`` to ``versioned(2)`` all four are stale (Dagster's own resolver, what
  the UI's *Unsynced* shows), not just the selected one;
* a step finished by another run (an interrupted run a re-execution finds done) is recorded with
  that run's id and its real seconds, not 0 s;
* a step whose name is not its asset key (``lr_0.05`` -> ``lr_0_05``) is named both ways in the
  run's log lines, so filtering by either finds them;
* ``StepLease.cancel`` stops a running step and deletes the lease (what a guarded Ray task watches).
"""

from __future__ import annotations

import threading

import dagster as dg

from marin_assets.dagster_bridge.dagster_internals import CODE_VERSION_TAG, DATA_VERSION_TAG
from marin_assets.dagster_bridge.step_ops import build_step_assets
from marin_assets.execution import ExecutorStep, StepGraph, this_output_path, versioned
from marin_assets.execution.declarations import Experiment
from marin_assets.execution.lease import lease_for_output
from marin_assets.execution.outcomes import ExecutorOptions
from marin_assets.execution.runner import StepRunner
from marin_resources.dagster_resources import MarinStorageResource, RayResource
from tests.dagster_bridge.run_steps import NapConfig, nap, research_chain
from tests.dagster_private import stale_status

KEYS = {name: dg.AssetKey(["team", name]) for name in ("prep", "features", "train", "evaluate")}


def _resources(prefix: str) -> dict:
    return {"marin_storage": MarinStorageResource(prefix=prefix), "ray": RayResource()}


def _defs(prefix: str, prep_version: int) -> tuple[dg.Definitions, list[dg.AssetsDefinition]]:
    assets = build_step_assets(Experiment("team", list(research_chain(prep_version).values())), prefix=prefix)
    return dg.Definitions(assets=assets, resources=_resources(prefix)), assets


def test_inputs_brought_along_turn_stale_after_an_edit(prefix, dagster_home):
    instance = dg.DagsterInstance.get()
    defs, assets = _defs(prefix, 1)
    result = dg.materialize(assets, instance=instance, resources=_resources(prefix), selection=[KEYS["evaluate"]])
    assert result.success
    for name, key in KEYS.items():
        record = instance.fetch_materializations(key, limit=1).records[0]
        tags = record.event_log_entry.dagster_event.event_specific_data.materialization.tags or {}
        assert tags.get(CODE_VERSION_TAG) and tags.get(DATA_VERSION_TAG), (name, tags)
        assert stale_status(defs, instance, key) == "FRESH", name
    edited, _ = _defs(prefix, 2)  # prep's versioned(1) -> versioned(2), as after Reload definitions
    assert {name: stale_status(edited, instance, key) for name, key in KEYS.items()} == dict.fromkeys(KEYS, "STALE")


def test_a_step_another_run_finished_keeps_its_seconds_and_run(prefix, dagster_home):
    chain = research_chain(1, train_seconds=1.0)
    graph = StepGraph(list(chain.values()), prefix)
    # The interrupted run computed everything (its driver died before Dagster recorded it).
    StepRunner(ExecutorOptions(run_id="interrupted1")).run(graph)
    _, assets = _defs(prefix, 1)
    result = dg.materialize(assets, instance=dg.DagsterInstance.get(), resources=_resources(prefix))
    assert result.success
    by_key = {
        e.event_specific_data.materialization.asset_key: e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    train = by_key[KEYS["train"]]
    assert train["marin/computed_by_run"].value == "interrupted1"
    assert train["marin/seconds"].value >= 1.0, train["marin/seconds"]
    assert train["marin/cached"].value is True


def test_log_lines_name_the_step_and_its_asset_key(prefix, dagster_home):
    step = ExecutorStep("sweep/lr_0.05", nap, NapConfig(this_output_path(), versioned(0.1), "lr"))
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        build_step_assets(Experiment("sweep", [step]), prefix=prefix), instance=instance, resources=_resources(prefix)
    )
    assert result.success
    lines = [r.event_log_entry.user_message for r in instance.get_records_for_run(result.run_id).records]
    started = [line for line in lines if "started" in line and "lr_0" in line]
    assert started and all("sweep/lr_0.05" in line and "sweep/lr_0_05" in line for line in started), lines


def test_cancelling_a_lease_stops_its_step_and_deletes_the_lease(prefix):
    output = f"{prefix}/step"
    lease = lease_for_output(output, heartbeat_s=1.0, stale_s=30.0)
    assert lease.try_acquire()
    cancelled = threading.Event()
    lease.on_lost(cancelled.set)
    assert lease.cancel("the Dagster run was terminated")
    assert cancelled.wait(5)
    assert lease.lost.is_set() and "terminated" in str(lease.lost_error())
    assert lease.backend.read(lease.path) is None  # a task guarding itself on a Ray worker sees it gone
    other = lease_for_output(output, heartbeat_s=1.0, stale_s=30.0)
    assert other.try_acquire()  # and the next run takes it at once
    assert not lease.cancel("again")  # no longer held: nothing to stop
    other.release()
    lease.release()


def test_a_watched_step_is_an_op_of_its_own_and_the_rest_stay_packed(prefix, dagster_home):
    chain = research_chain(1, train_watched=True)
    assets = build_step_assets(Experiment("team", list(chain.values())), prefix=prefix)
    ops = {a.node_def.name: sorted(k.path[-1] for k in a.keys) for a in assets}
    # train has its own op; evaluate (after it) is packed apart from prep and features (before it).
    assert ops == {"team__steps": ["features", "prep"], "team__team__train": ["train"], "team__steps_l1": ["evaluate"]}
    instance = dg.DagsterInstance.get()
    result = dg.materialize(assets, instance=instance, resources=_resources(prefix))
    assert result.success
    # Dagster's own step events: train ran as a step of the run, with its own start and success.
    steps_succeeded = {e.step_key for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_SUCCESS}
    assert steps_succeeded == set(ops)
