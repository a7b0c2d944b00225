"""Resources of marin-dagster: storage, Ray, accelerators.

Submodules without Dagster (``ray_cluster``, ``accelerators``, ``storage``) are used by the step
engine; the Dagster ``ConfigurableResource`` wrappers live in ``dagster_resources``. This package
never imports ``marin_assets``.
"""
