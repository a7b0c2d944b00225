"""Fixtures of the location tests: a real ``dagster dev`` (shared with the UI tests)."""

from tests.ui.conftest import dagster_dev  # noqa: F401 - the fixture, for the daemon tests
