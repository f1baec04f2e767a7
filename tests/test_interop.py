"""Ordering across streams and libraries: events, PyTorch and CuPy streams."""

from __future__ import annotations

import numpy as np
import pytest

import cudriver as cu

from ._support import COPY_KERNEL, import_or_skip, load_kernels

SRC = (
    r"""
extern "C" __global__ void slow_fill(float* x, float v, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""
    + COPY_KERNEL
)
N = 1 << 16
GRID, BLOCK = N // 256, 256
SPIN = 20_000_000  # about 10 ms of clock cycles: unordered work would see old data


@pytest.fixture(scope="module")
def k(primary: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(primary, SRC, "slow_fill", "copy")


@pytest.mark.gpu
def test_two_streams_ordered_only_by_an_event(ctx: cu.Context, k: dict) -> None:
    producer, consumer = cu.Stream(), cu.Stream()
    x = cu.DeviceBuffer.from_array(np.zeros(N, np.float32))
    out = cu.DeviceBuffer.from_array(np.full(N, -1, np.float32))
    start, done = cu.Event(timing=True), cu.Event(timing=True)
    start.record(producer)
    k["slow_fill"].launch(producer, GRID, BLOCK, x, 7.0, N, SPIN)
    done.record(producer)
    consumer.wait(done)
    k["copy"].launch(consumer, GRID, BLOCK, out, x, N)
    consumer.synchronize()
    np.testing.assert_array_equal(out.copy_to(), np.full(N, 7, np.float32))
    assert start.elapsed_ms(done) > 1.0  # the spin really ran before the fill


@pytest.mark.gpu
def test_unordered_streams_would_race(ctx: cu.Context, k: dict) -> None:
    # The control for the test above: without the wait, the consumer sees old data.
    producer, consumer = cu.Stream(), cu.Stream()
    x = cu.DeviceBuffer.from_array(np.zeros(N, np.float32))
    out = cu.DeviceBuffer(N * 4)
    k["slow_fill"].launch(producer, GRID, BLOCK, x, 7.0, N, SPIN)
    k["copy"].launch(consumer, GRID, BLOCK, out, x, N)
    consumer.synchronize()
    early = out.copy_to().view(np.float32)
    producer.synchronize()
    assert (early == 0).all()


@pytest.mark.gpu
def test_torch_stream_orders_with_torch_work(ctx: cu.Context, k: dict) -> None:
    torch = import_or_skip("torch")
    ts = torch.cuda.Stream()
    s = cu.Stream.from_handle(ts)
    assert not s.owned
    assert int(s) == ts.cuda_stream
    t = torch.zeros(N, device="cuda")
    torch.cuda.synchronize()
    # our kernel, then torch work on the same stream: torch sees our result
    k["slow_fill"].launch(s, GRID, BLOCK, t, 5.0, N, SPIN)
    with torch.cuda.stream(ts):
        u = t * 2
    ts.synchronize()
    assert bool((u == 10).all())
    # torch work, then our kernel on the same stream: we see torch's result
    with torch.cuda.stream(ts):
        torch.cuda._sleep(SPIN)
        t.fill_(3.0)
    out = cu.DeviceBuffer(N * 4)
    k["copy"].launch(s, GRID, BLOCK, out, t, N)
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to().view(np.float32), np.full(N, 3, np.float32))


@pytest.mark.gpu
def test_cupy_stream_orders_with_cupy_work(ctx: cu.Context, k: dict) -> None:
    cupy = import_or_skip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    s = cu.Stream.from_handle(cs)
    assert int(s) == cs.ptr
    with cs:
        a = cupy.zeros(N, dtype=cupy.float32)
    cs.synchronize()
    k["slow_fill"].launch(s, GRID, BLOCK, a, 5.0, N, SPIN)
    with cs:
        b = a * 2
    cs.synchronize()
    assert bool((b == 10).all())
    # CuPy work, then ours on the same stream
    with cs:
        c = cupy.full(N, 4.0, dtype=cupy.float32) + a  # 9.0 once a is 5.0
    out = cu.DeviceBuffer(N * 4)
    k["copy"].launch(s, GRID, BLOCK, out, c, N)
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to().view(np.float32), np.full(N, 9, np.float32))
