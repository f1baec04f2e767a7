"""Shared fixtures, and the skipping of GPU tests where no GPU is usable.

How a test says it needs a GPU: ``@pytest.mark.gpu`` on the test function, or on its
class when every test of the class needs one. Nothing else: no module-level
``pytestmark``, no local aliases of the marker, so that each GPU test shows it where it
is defined and keeps it when it moves. Where no driver or device is usable, the ``gpu``
tests are skipped with the reason (``pytest_collection_modifyitems`` below).

A GPU test that measures the device's free memory also carries ``device_memory``: the
driver reports that figure for the whole device, so when pytest-xdist runs the suite in
parallel such a test waits for the GPU tests of the other workers to end, and holds
theirs back while it runs (``_device_memory_alone`` below).

The tests of behaviour without a driver carry ``no_driver`` from ``tests/_support.py``,
which holds the plain helpers and constants shared by the test files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

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


@contextlib.contextmanager
def _flock(path: Path, how: int) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, how)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(autouse=True)
def _device_memory_alone(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under pytest-xdist, run each ``device_memory`` test alone among the GPU tests.

    A reader-writer lock across the workers, on files of the run: every GPU test holds
    ``shared`` shared, a ``device_memory`` test holds it exclusively. The ``gate`` lock,
    taken by each test before ``shared`` and kept by a ``device_memory`` test while it
    waits, stops new GPU tests from starting ahead of one that waits.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    node = request.node
    if run is None or node.get_closest_marker("gpu") is None:
        yield
        return
    base = Path(tempfile.gettempdir()) / f"cudriver-tests-{run}"
    gate, shared = base.with_suffix(".gate"), base.with_suffix(".lock")
    if node.get_closest_marker("device_memory") is not None:
        with _flock(gate, fcntl.LOCK_EX), _flock(shared, fcntl.LOCK_EX):
            yield
        return
    with _flock(gate, fcntl.LOCK_EX):
        pass
    with _flock(shared, fcntl.LOCK_SH):
        yield


#: How long a GPU test's leftover work may take to finish before the test fails.
PENDING_S = 20.0


@pytest.fixture(autouse=True)
def _no_work_left_pending(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a GPU test that leaves work pending on a blocking stream.

    Such work (a ``wait_value32`` nobody satisfies, say) stalls every later legacy-stream
    or whole-context wait in the same worker, far from the test that left it. After each
    GPU test an event recorded on the legacy stream of every active primary context
    (ordered after every blocking stream's work) must complete within
    :data:`PENDING_S`; it is polled, never waited for.
    """
    yield
    if request.node.get_closest_marker("gpu") is None or not cu.errors.GUARD.initialized:
        return
    if cu.errors.GUARD.open:  # a capture left open: a legacy record would break it
        return
    from cuda.bindings import driver as raw

    ok = raw.CUresult.CUDA_SUCCESS
    r = raw.cuDeviceGetCount()
    for ordinal in range(r[1] if r[0] == ok else 0):
        dev = raw.cuDeviceGet(ordinal)[1]
        state = raw.cuDevicePrimaryCtxGetState(dev)
        if state[0] != ok or not state[2]:
            continue  # not active: nothing can be pending there
        ctx = raw.cuDevicePrimaryCtxRetain(dev)[1]
        raw.cuCtxPushCurrent(ctx)
        try:
            ev = raw.cuEventCreate(raw.CUevent_flags.CU_EVENT_DISABLE_TIMING)[1]
            raw.cuEventRecord(ev, raw.CUstream(1))  # CU_STREAM_LEGACY
            deadline = time.monotonic() + PENDING_S
            while raw.cuEventQuery(ev)[0] == raw.CUresult.CUDA_ERROR_NOT_READY:
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"{request.node.nodeid} left work pending on a blocking stream of "
                        f"device {ordinal} ({PENDING_S} s after it ended)"
                    )
                time.sleep(0.005)
            raw.cuEventDestroy(ev)
        finally:
            raw.cuCtxPopCurrent()
            raw.cuDevicePrimaryCtxRelease(dev)


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
