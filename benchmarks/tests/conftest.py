"""The ``gpu`` marker for the benchmark's tests: skipped with a reason when no GPU is usable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import gpu_unavailable_reason

__all__ = ["gpu_unavailable_reason"]  # also imported from here by test_harness

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The hook sees every collected item: mark only this directory's own.
    gpu_items = [
        it
        for it in items
        if it.get_closest_marker("gpu") is not None and _HERE in Path(it.path).parents
    ]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for it in gpu_items:
        it.add_marker(skip)
