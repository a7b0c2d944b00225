"""Moved to :mod:`marin_assets.experiments.sample_data` (the demo corpus lives beside the
experiments that use it). ``python -m marin_assets.landing.sample_data ...`` keeps working: it
runs the new module. Nothing is imported from here."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("marin_assets.experiments.sample_data", run_name="__main__", alter_sys=True)
