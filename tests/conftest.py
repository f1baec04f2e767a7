"""Shared fixtures, and the skipping of GPU tests where no GPU is usable.

How a test says it needs a GPU: ``@pytest.mark.gpu`` on the test function, or on its
class when every test of the class needs one. Nothing else: no module-level
``pytestmark``, no local aliases of the marker, so that each GPU test shows it where it
is defined and keeps it when it moves. Where no driver or device is usable, the ``gpu``
tests are skipped with the reason (``pytest_collection_modifyitems`` below).

The tests of behaviour without a driver carry ``no_driver`` from ``tests/_support.py``,
which holds the plain helpers and constants shared by the test files.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest

import cudriver as cu

from ._support import Mapped, gpu_unavailable_reason

__all__ = ["gpu_unavailable_reason"]  # also imported from here by test_cli and test_selftest

# The compile cache of the test run (and of the examples and doc pages it starts): its
# own directory, not the user's.
if not os.environ.get("CUDRIVER_CACHE_DIR"):
    os.environ["CUDRIVER_CACHE_DIR"] = tempfile.mkdtemp(prefix="cudriver-test-cache-")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"gpu test: {reason}")
    for it in gpu_items:
        it.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> cu.Device:
    return cu.Device(0)


@pytest.fixture(scope="session")
def primary(device: cu.Device) -> Iterator[cu.Context]:
    ctx = device.primary_context()
    yield ctx
    ctx.close()


@pytest.fixture
def ctx(primary: cu.Context) -> Iterator[cu.Context]:
    """Device 0's primary context, current for the test."""
    primary.set_current()
    yield primary
    primary.set_current()


@pytest.fixture
def stream(ctx: cu.Context) -> Iterator[cu.Stream]:
    """A new non-blocking stream on device 0's primary context, closed after the test."""
    s = cu.Stream(context=ctx)
    yield s
    if not s.closed:
        s.synchronize()
        s.close()


@pytest.fixture
def mapped(ctx: cu.Context) -> Iterator[Mapped]:
    """4 KiB of zeroed device-mapped pinned memory; its gate word is opened at the end."""
    m = Mapped(4096)
    yield m
    m.open()  # never leave a stream blocked on it
    m.close()


@pytest.fixture
def fake_stream() -> cu.Stream:
    """A borrowed Stream over a made-up handle: any driver call with it would fail (or,
    without a GPU, find no driver), so the errors the tests see come from the checks made
    before the driver."""
    return cu.Stream.from_handle(0x1230)
