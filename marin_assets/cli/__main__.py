"""``python -m marin_assets.cli ...``: the ``marin`` command without its console script."""

from marin_assets.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
