"""pytest hooks for Loom's Python tests: missing tools fail under `make test` (build_tools.py)."""

from __future__ import annotations

import pytest

from build_tools import MISSING_MARK


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{MISSING_MARK}(message): a tool the test needs is missing (fails the test)")


def pytest_runtest_setup(item):
    mark = item.get_closest_marker(MISSING_MARK)
    if mark is not None:
        pytest.fail(f"{mark.args[0]}; make test needs every tool", pytrace=False)
