"""The tests' uses of Dagster's private API (imported when called; with ``marin_assets/dagster_bridge/
dagster_internals.py`` the only place that imports ``dagster._``): what the UI's *Unsynced* shows
(Dagster serves it only through GraphQL) and a ``dagster.yaml`` checked against Dagster's schema."""

from __future__ import annotations

from typing import Any

import dagster as dg


def _stale_resolver(defs: dg.Definitions, instance: dg.DagsterInstance) -> Any:
    from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._time import get_current_datetime

    graph = defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def stale_causes(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> list[tuple[str, str]]:
    """Dagster's stale causes of ``key`` (what the UI's *Unsynced* lists) as (category, dependency key)."""
    return [
        (cause.category.value, cause.dependency.asset_key.to_user_string() if cause.dependency else "")
        for cause in _stale_resolver(defs, instance).get_stale_causes(key)
    ]


def stale_status(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey) -> str:
    """Dagster's stale status of ``key``: ``"FRESH"``, ``"STALE"`` or ``"MISSING"``."""
    return _stale_resolver(defs, instance).get_status(key).value


def validated_instance_config(dagster_home: str) -> dict[str, Any]:
    """The ``dagster.yaml`` of ``dagster_home`` as Dagster validates it (raises on a schema error)."""
    from dagster._core.instance.config import dagster_instance_config

    validated, _ = dagster_instance_config(dagster_home)
    return validated
