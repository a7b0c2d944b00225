"""Read-only data browser of a Marin prefix: ``python -m marin_assets.browse --prefix ...``.

See ``docs/browse.md``.
"""
