"""Experiments: scripts that build steps from the stage libraries and call ``executor_main``."""
