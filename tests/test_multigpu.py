"""Two GPUs: peer access, peer copies, a kernel reading another device's memory, a
shared pool, events across devices, and objects used whichever context is current.

Skipped, with the reason, on a machine with fewer than two devices.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import cudriver as cu

from ._support import gpu_unavailable_reason, load_kernels

SOURCE = r"""
extern "C" __global__ void gather(float* out, const float* in, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = scale * in[i];
}
"""
N = 1 << 16
GRID, BLOCK = N // 256, 256


def _two_devices_reason() -> str | None:
    reason = gpu_unavailable_reason()
    if reason is not None:
        return reason
    n = cu.Device.count()
    return None if n >= 2 else f"needs two GPUs; this machine has {n}"


@pytest.fixture
def pair() -> Iterator[tuple[cu.Context, cu.Context]]:
    reason = _two_devices_reason()
    if reason is not None:
        pytest.skip(reason)
    d0, d1 = cu.Device(0), cu.Device(1)
    c0, c1 = d0.primary_context(), d1.primary_context()
    c0.set_current()
    yield c0, c1
    c0.synchronize()
    c1.synchronize()
    c0.set_current()


def _x(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(N).astype(np.float32)


@pytest.mark.gpu
def test_peer_access_and_a_kernel_reading_the_other_device(
    pair: tuple[cu.Context, cu.Context],
) -> None:
    c0, c1 = pair
    d0, d1 = c0.device, c1.device
    if not (d1.can_access_peer(d0) and d0.can_access_peer(d1)):
        pytest.skip("these two devices cannot access each other's memory")
    d1.enable_peer_access(d0)
    d1.enable_peer_access(d0)  # twice is fine
    d0.enable_peer_access(d1)
    x = _x(1)
    with c0:
        src = cu.DeviceBuffer.from_array(x)  # on device 0
    with c1:
        k = load_kernels(c1, SOURCE, "gather")["gather"]
        out = cu.DeviceBuffer(4 * N)
        s1 = cu.Stream()
        k.launch(s1, GRID, BLOCK, out, src, np.float32(3.0), N)  # reads device 0's memory
        s1.synchronize()
        np.testing.assert_allclose(out.copy_to().view(np.float32), 3.0 * x, rtol=1e-6)
    d1.disable_peer_access(d0)
    d1.disable_peer_access(d0)  # not enabled: no error


@pytest.mark.gpu
def test_peer_copy_matches_numpy(pair: tuple[cu.Context, cu.Context]) -> None:
    c0, c1 = pair
    x = _x(2)
    with c0:
        a = cu.DeviceBuffer.from_array(x)
        s0 = cu.Stream()
    with c1:
        b = cu.DeviceBuffer(4 * N)
    cu.copy_peer(b, a)  # device 0 -> device 1, synchronous
    np.testing.assert_array_equal(b.copy_to().view(np.float32), x)
    a.fill(0)
    cu.copy_peer(a, b, 4 * 100, stream=s0)  # back, a part, on a stream
    s0.synchronize()
    got = a.copy_to().view(np.float32)
    np.testing.assert_array_equal(got[:100], x[:100])
    assert not got[100:].any()
    b2 = cu.DeviceBuffer(4 * N, context=c1)
    b2.copy_from(a)  # unified addressing: an ordinary copy across devices works too
    np.testing.assert_array_equal(b2.copy_to().view(np.float32)[:100], x[:100])


@pytest.mark.gpu
def test_a_pool_shared_between_devices(pair: tuple[cu.Context, cu.Context]) -> None:
    c0, c1 = pair
    d0, d1 = c0.device, c1.device
    if not d1.can_access_peer(d0):
        pytest.skip("device 1 cannot access device 0's memory")
    pool = cu.MemoryPool(d0)
    assert pool.access(d1) is cu.MemAccess.NONE
    pool.set_access(d1, cu.MemAccess.READ_WRITE)
    assert pool.access(d1) is cu.MemAccess.READ_WRITE
    x = _x(3)
    with c0:
        s0 = cu.Stream()
        shared = cu.DeviceBuffer(4 * N, stream=s0, pool=pool)
        shared.copy_from(x, stream=s0)
        done = s0.record()
    with c1:
        k = load_kernels(c1, SOURCE, "gather")["gather"]
        s1 = cu.Stream()
        s1.wait(done)  # an event of device 0 ordering a stream of device 1
        k.launch(s1, GRID, BLOCK, shared, shared, np.float32(2.0), N)  # in place, on device 1
        s1.synchronize()
    np.testing.assert_allclose(shared.copy_to(stream=s0).view(np.float32), 2.0 * x, rtol=1e-6)
    s0.synchronize()
    shared.close()
    s0.synchronize()
    pool.set_access(d1, cu.MemAccess.NONE)
    pool.close()


@pytest.mark.gpu
def test_objects_work_whichever_context_is_current(pair: tuple[cu.Context, cu.Context]) -> None:
    c0, c1 = pair
    x = _x(4)
    with c0:
        s0 = cu.Stream()
        buf = cu.DeviceBuffer.from_array(x)
        ev = cu.Event(timing=True)
        k0 = load_kernels(c0, SOURCE, "gather")["gather"]
        out = cu.DeviceBuffer(4 * N)
        pinned = cu.PinnedBuffer(4 * N)
    c1.set_current()  # device 1 current from here on
    assert cu.Context.current() == c1
    buf.fill(0, stream=s0)
    buf.copy_from(x, stream=s0)
    ev.record(s0)
    s0.wait(ev)
    got = np.empty_like(x)
    buf.copy_to(got, stream=s0)
    s0.synchronize()
    ev.synchronize()
    np.testing.assert_array_equal(got, x)
    assert buf.context == c0
    assert s0.device == c0.device
    cu.copy_2d(pinned, buf, width_bytes=4 * N, height=1)
    np.testing.assert_array_equal(pinned.array(np.float32), x)
    # A launch runs in the kernel's context, whichever is current (measured on two
    # H200s with the CUDA 13.0 driver: plain, prepared and captured launches).
    k0.launch(s0, GRID, BLOCK, out, buf, np.float32(5.0), N)
    k0.prepare(GRID, BLOCK, out, out, np.float32(2.0), N).launch(s0)
    s0.synchronize()
    np.testing.assert_allclose(out.copy_to().view(np.float32), 10.0 * x, rtol=1e-6)
    assert cu.Context.current() == c1  # nothing changed the caller's current context
    _free, total1 = cu.mem_get_info()
    assert total1 == c1.device.total_memory
    assert c0.device.mem_info[1] == c0.device.total_memory
