"""Running experiments elsewhere: ``python -m marin_assets.run.ray_run`` submits one as a Ray job.

See ``docs/ray_run.md``.
"""
