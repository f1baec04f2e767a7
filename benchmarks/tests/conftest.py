"""The ``gpu`` marker for the benchmark's tests: skipped with a reason when no GPU is usable."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

import cudriver as cu

_HERE = Path(__file__).resolve().parent


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when a driver and a device are usable, else why not (probed once)."""
    try:
        cu.init()
        n = cu.Device.count()
    except cu.DriverNotFoundError:
        return "no NVIDIA driver on this machine"
    except cu.CudaError as exc:
        return f"the CUDA driver is unusable: {exc}"
    if n == 0:
        return "the CUDA driver sees no device"
    return None


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
