"""The landing zone of data drops (``zone``): layout, manifests, validation, and the declared
partition source of a landing folder (:class:`~marin_assets.landing.zone.LandingDrops`). No Dagster
here (the sensors live in ``dagster_bridge/``) and nothing above the stages: the sample corpus is
in ``experiments/sample_data.py``. Marin has no landing zone: this is ours."""
