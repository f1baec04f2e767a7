"""ManagedBuffer: managed memory, host access, prefetch and advice."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._lifetime import _handle
from cudriver._memory import managed
from cudriver._memory.managed import ManagedBuffer
from cudriver._runtime import _bindings
from cudriver._runtime._enums import DeviceAttribute, MemAdvise, MemAttach

from ._support import CAI, load_kernels

SUCCESS = drv.CUresult.CUDA_SUCCESS
RANGE = drv.CUmem_range_attribute
LOCATION = drv.CUmemLocationType


@pytest.fixture
def host() -> np.ndarray[Any, Any]:
    """64 bytes of host memory, 0..63."""
    return np.arange(64, dtype=np.uint8)


@pytest.fixture
def fake(host: np.ndarray[Any, Any]) -> Iterator[ManagedBuffer]:
    """A borrowed ManagedBuffer over plain host memory: no driver call makes or frees it,
    and its array() reads and writes real bytes; driver calls with it would fail."""
    buf = ManagedBuffer.from_handle(host.ctypes.data, host.nbytes, owner=host)
    assert isinstance(buf, ManagedBuffer)
    yield buf
    buf.close()


# -- the enum ------------------------------------------------------------------------------


def test_mem_advise_has_the_drivers_values() -> None:
    ours = {m.name: m.value for m in MemAdvise}
    theirs = {m.name.removeprefix("CU_MEM_ADVISE_"): int(m) for m in drv.CUmem_advise}
    assert ours == theirs
    assert MemAdvise.__module__ == "cudriver"


# -- arguments checked before any driver call -----------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"nbytes": 0}, ValueError, "nbytes"),
        ({"nbytes": -4}, ValueError, "nbytes"),
        ({"nbytes": 1.5}, TypeError, "nbytes"),
        ({"nbytes": 64, "attach": MemAttach.SINGLE}, ValueError, "Stream.attach_memory"),
        ({"nbytes": 64, "attach": 3}, ValueError, "attach"),
        ({"nbytes": 64, "attach": 0}, ValueError, "attach"),
        ({"nbytes": 64, "attach": "global"}, TypeError, "attach"),
        ({"nbytes": 64, "attach": True}, TypeError, "attach"),
        ({"nbytes": 64, "attach": None}, TypeError, "attach"),
        ({"nbytes": 64, "context": "ctx"}, TypeError, "context"),
    ],
)
def test_constructor_arguments(kwargs: dict[str, Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        ManagedBuffer(**kwargs)


def test_from_array_and_empty_arguments() -> None:
    with pytest.raises(ValueError, match="C-contiguous"):
        ManagedBuffer.from_array(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="empty"):
        ManagedBuffer.from_array(np.zeros(0, np.float32))
    with pytest.raises(TypeError, match="host array"):
        ManagedBuffer.from_array(CAI())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream"):
        ManagedBuffer.from_array(np.ones(4), stream="s")
    with pytest.raises(TypeError, match="positional"):  # stream is keyword-only
        ManagedBuffer.from_array(np.ones(4), 0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="attach"):
        ManagedBuffer.from_array(np.ones(4), attach=MemAttach.SINGLE)
    for stream in (0, "s", cu.Stream.from_handle(0x1230)):
        with pytest.raises(TypeError, match=r"empty\(\) takes no stream.*stream order"):
            ManagedBuffer.empty(16, np.float32, stream=stream)
    with pytest.raises(ValueError, match="no elements"):
        ManagedBuffer.empty((4, 0), np.float32)
    with pytest.raises(TypeError, match="attach"):
        ManagedBuffer.empty(16, attach="host")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("location", "exc", "match"),
    [
        ("gpu", ValueError, "'host'"),
        ("HOST", ValueError, "'host'"),
        (-1, ValueError, "for the host pass 'host'"),
        (1.0, TypeError, "location"),
        (True, TypeError, "location"),
        (None, TypeError, "location"),
        (drv.CUdevice(0), TypeError, "location"),
    ],
)
def test_bad_prefetch_locations(
    fake: ManagedBuffer, fake_stream: cu.Stream, location: Any, exc: type[Exception], match: str
) -> None:
    with pytest.raises(exc, match=match):
        fake.prefetch(location, stream=fake_stream)


def test_prefetch_needs_a_stream(fake: ManagedBuffer) -> None:
    # Never the legacy stream on its own: it would break a capture open on a blocking
    # stream (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT).
    with pytest.raises(TypeError, match="stream"):
        fake.prefetch("host")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"stream is required, not None.*Stream.legacy\(\)"):
        fake.prefetch("host", stream=None)
    with pytest.raises(TypeError, match="positional"):
        fake.prefetch("host", 0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="'host'"):  # the location is checked first
        fake.prefetch("mars", stream=None)  # type: ignore[arg-type]


def test_prefetch_and_advise_arguments(fake: ManagedBuffer) -> None:
    with pytest.raises(TypeError, match="stream"):
        fake.prefetch("host", stream="s")
    with pytest.raises(ValueError, match="advice"):
        fake.advise(99)
    with pytest.raises(ValueError, match="advice"):
        fake.advise(0)
    with pytest.raises(TypeError, match="advice"):
        fake.advise("SET_READ_MOSTLY")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="advice"):
        fake.advise(True)
    for advice in (
        MemAdvise.SET_PREFERRED_LOCATION,
        MemAdvise.SET_ACCESSED_BY,
        MemAdvise.UNSET_ACCESSED_BY,
    ):
        with pytest.raises(ValueError, match=f"location: MemAdvise.{advice.name} needs"):
            fake.advise(advice)
    with pytest.raises(ValueError, match="'host'"):
        fake.advise(MemAdvise.SET_ACCESSED_BY, "mars")
    with pytest.raises(ValueError, match="device ordinal"):
        fake.advise(MemAdvise.SET_PREFERRED_LOCATION, -2)
    with pytest.raises(TypeError, match="location"):
        fake.advise(MemAdvise.SET_READ_MOSTLY, 0.5)  # type: ignore[arg-type]


# -- host access ----------------------------------------------------------------------------


def test_array_reads_and_writes_the_memory(fake: ManagedBuffer, host: np.ndarray[Any, Any]) -> None:
    a = fake.array()
    assert (a.dtype, a.shape) == (np.uint8, (64,))
    a[3] = 200
    assert host[3] == 200
    host[5] = 77
    assert a[5] == 77
    words = fake.array(np.uint32, (4, 4))
    np.testing.assert_array_equal(words, host.view(np.uint32).reshape(4, 4))
    assert fake.array(np.float64).shape == (8,)
    with pytest.raises(ValueError, match="whole number"):
        fake.array(np.dtype("V3"))
    with pytest.raises(ValueError, match="needs"):
        fake.array(np.uint32, (5,))


def test_array_defaults_to_the_remembered_dtype_and_shape(
    fake: ManagedBuffer, host: np.ndarray[Any, Any]
) -> None:
    typed = fake.cast(np.float32, (4, 4))
    a = typed.array()
    assert (a.dtype, a.shape) == (np.float32, (4, 4))
    np.testing.assert_array_equal(a, host.view(np.float32).reshape(4, 4))
    assert typed.array(shape=16).shape == (16,)
    assert typed.array(np.uint8).shape == (64,)


def test_views_are_managed_buffers(fake: ManagedBuffer, host: np.ndarray[Any, Any]) -> None:
    v = fake[8:24]
    assert type(v) is ManagedBuffer
    assert type(fake.view(4)) is ManagedBuffer
    assert type(fake.cast(np.uint16)) is ManagedBuffer
    assert v.base is fake
    assert v.ptr == fake.ptr + 8
    assert fake.view(0) == fake
    np.testing.assert_array_equal(v.array(), host[8:24])
    np.testing.assert_array_equal(v[4:8].array(), host[12:16])
    v.array()[0] = 1
    assert host[8] == 1
    fake.close()
    assert v.closed  # closing the allocation closes its views


def test_array_keeps_a_lease_on_the_allocation(fake: ManagedBuffer) -> None:
    state = fake._state
    assert not state.leases
    a = fake.array(np.uint32)
    b = fake[16:32].array()  # a view's array leases the allocation it was made from
    assert len(state.leases) == 2
    fake.close()
    assert fake.closed
    a[0] = 1  # still mapped: the release waits for the arrays
    del a
    gc.collect()
    assert len(state.leases) == 1
    del b
    gc.collect()
    assert not state.leases


def test_closed_buffer_raises_before_the_driver(fake: ManagedBuffer) -> None:
    fake.close()
    calls: list[Any] = [
        lambda: fake.array(),
        lambda: fake.prefetch("host", stream=0),
        lambda: fake.prefetch("bad location", stream=0),
        lambda: fake.prefetch("host", stream=None),
        lambda: fake.advise(MemAdvise.SET_READ_MOSTLY),
        lambda: fake.read_mostly,
        lambda: fake.preferred_location,
        lambda: fake.last_prefetch_location,
        lambda: fake.accessed_by,
        lambda: fake[0:8],
    ]
    for call in calls:
        with pytest.raises(cu.ClosedError, match="ManagedBuffer is closed"):
            call()


# -- the version shims in _bindings -------------------------------------------------------


class FakeDriver:
    """Stands in for cuda.bindings.driver in _bindings: records the calls."""

    CUmemLocation = drv.CUmemLocation
    CUmemLocationType = drv.CUmemLocationType
    CUmem_range_attribute = drv.CUmem_range_attribute
    CUdevice = drv.CUdevice

    def __init__(self, answers: dict[Any, int] | None = None, status: Any = SUCCESS) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.answers = answers or {}
        self.status = status

    def cuMemPrefetchAsync(self, *args: Any) -> tuple[Any, ...]:
        self.calls.append(("cuMemPrefetchAsync", args))
        return (self.status,)

    def cuMemAdvise(self, *args: Any) -> tuple[Any, ...]:
        self.calls.append(("cuMemAdvise", args))
        return (self.status,)

    def cuMemRangeGetAttribute(self, size: int, attr: Any, ptr: Any, n: int) -> tuple[Any, ...]:
        self.calls.append(("cuMemRangeGetAttribute", (size, attr, ptr, n)))
        if self.status is not SUCCESS:
            return (self.status, None)
        return (SUCCESS, self.answers[attr])


@pytest.fixture(params=[13, 12], ids=["bindings13", "bindings12"])
def fake_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    fd = FakeDriver()
    monkeypatch.setattr(_bindings, "drv", fd)
    monkeypatch.setattr(_bindings, "_LOCATIONS", request.param >= 13)

    def range_int(attr: Any, ptr: Any, n: int) -> tuple[Any, int]:
        # _bindings reads the location-type attributes through libcuda (the bindings
        # refuse them); here they go to the fake driver too.
        r = fd.cuMemRangeGetAttribute(4, attr, ptr, n)
        return r[0], (0 if r[1] is None else int(r[1]))

    monkeypatch.setattr(_bindings, "_range_int", range_int)
    return fd


def _where(arg: Any) -> tuple[Any, int]:
    """(location type, id) of a CUmemLocation, or ("ordinal", n) of a CUdevice."""
    if isinstance(arg, drv.CUmemLocation):
        return (arg.type, arg.id)
    return ("ordinal", int(arg))


def test_installed_bindings_get_the_signature_they_have() -> None:
    prefetch = (drv.cuMemPrefetchAsync.__doc__ or "").splitlines()[0]
    advise = (drv.cuMemAdvise.__doc__ or "").splitlines()[0]
    if _bindings._LOCATIONS:
        assert "CUmemLocation location" in prefetch
        assert "flags" in prefetch
        assert "CUmemLocation location" in advise
    else:
        assert "dstDevice" in prefetch
        assert "device" in advise
        assert "CUmemLocation" not in advise


def test_prefetch_shim(fake_driver: FakeDriver) -> None:
    stream = drv.CUstream(0x10)
    _bindings.mem_prefetch(0x1000, 64, 2, stream)
    _bindings.mem_prefetch(0x1000, 64, _bindings.DEVICE_CPU, stream)
    (n1, a1), (_n2, a2) = fake_driver.calls
    assert n1 == "cuMemPrefetchAsync"
    assert a1[:2] == (0x1000, 64)
    assert a1[-1] is stream
    if _bindings._LOCATIONS:  # (ptr, n, location, flags, stream)
        assert len(a1) == 5
        assert a1[3] == 0
        assert _where(a1[2]) == (LOCATION.CU_MEM_LOCATION_TYPE_DEVICE, 2)
        assert _where(a2[2])[0] == LOCATION.CU_MEM_LOCATION_TYPE_HOST
    else:  # (ptr, n, device, stream), the host as CU_DEVICE_CPU
        assert len(a1) == 4
        assert _where(a1[2]) == ("ordinal", 2)
        assert _where(a2[2]) == ("ordinal", -1)


def test_advise_shim(fake_driver: FakeDriver) -> None:
    advice = drv.CUmem_advise.CU_MEM_ADVISE_SET_PREFERRED_LOCATION
    _bindings.mem_advise(0x1000, 64, advice, 1)
    _bindings.mem_advise(0x1000, 64, advice, _bindings.DEVICE_CPU)
    (_n1, a1), (_n2, a2) = fake_driver.calls
    assert len(a1) == 4
    assert a1[:3] == (0x1000, 64, advice)
    if _bindings._LOCATIONS:
        assert _where(a1[3]) == (LOCATION.CU_MEM_LOCATION_TYPE_DEVICE, 1)
        assert _where(a2[3])[0] == LOCATION.CU_MEM_LOCATION_TYPE_HOST
    else:
        assert _where(a1[3]) == ("ordinal", 1)
        assert _where(a2[3]) == ("ordinal", -1)


@pytest.mark.parametrize("last_prefetch", [False, True])
def test_range_location_shim(fake_driver: FakeDriver, last_prefetch: bool) -> None:
    if last_prefetch:
        legacy = RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION
        kind = RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE
        ident = RANGE.CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID
    else:
        legacy = RANGE.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION
        kind = RANGE.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE
        ident = RANGE.CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID

    def ask(**answers: int) -> int:
        fake_driver.calls.clear()
        fake_driver.answers = {
            {"legacy": legacy, "kind": kind, "ident": ident}[k]: v for k, v in answers.items()
        }
        status, where = _bindings.mem_range_location(0x1000, 64, last_prefetch=last_prefetch)
        assert status is SUCCESS
        assert all(c[1][0] == 4 and c[1][2:] == (0x1000, 64) for c in fake_driver.calls)
        return where

    device, host = (
        int(LOCATION.CU_MEM_LOCATION_TYPE_DEVICE),
        int(LOCATION.CU_MEM_LOCATION_TYPE_HOST),
    )
    if _bindings._LOCATIONS:
        assert ask(kind=device, ident=3) == 3
        assert [c[1][1] for c in fake_driver.calls] == [kind, ident]
        assert ask(kind=host) == _bindings.DEVICE_CPU
        assert [c[1][1] for c in fake_driver.calls] == [kind]  # no id for the host
        assert ask(kind=int(LOCATION.CU_MEM_LOCATION_TYPE_HOST_NUMA)) == _bindings.DEVICE_CPU
        assert ask(kind=int(LOCATION.CU_MEM_LOCATION_TYPE_INVALID)) == _bindings.DEVICE_INVALID
    else:
        assert ask(legacy=3) == 3
        assert [c[1][1] for c in fake_driver.calls] == [legacy]
        assert ask(legacy=-1) == _bindings.DEVICE_CPU
        assert ask(legacy=-2) == _bindings.DEVICE_INVALID
    fake_driver.status = drv.CUresult.CUDA_ERROR_INVALID_VALUE
    status, where = _bindings.mem_range_location(0x1000, 64, last_prefetch=last_prefetch)
    assert status == drv.CUresult.CUDA_ERROR_INVALID_VALUE
    assert where == _bindings.DEVICE_INVALID


def test_failures_name_the_driver_function(fake_driver: FakeDriver) -> None:
    fake_driver.status = drv.CUresult.CUDA_ERROR_INVALID_VALUE
    with pytest.raises(cu.InvalidValueError, match="^cuMemPrefetchAsync failed"):
        managed._cuMemPrefetchAsync(0x1000, 64, 0, drv.CUstream(0))
    with pytest.raises(cu.InvalidValueError, match="^cuMemAdvise failed"):
        managed._cuMemAdvise(0x1000, 64, drv.CUmem_advise(1), 0)
    with pytest.raises(cu.InvalidValueError, match="^cuMemRangeGetAttribute failed"):
        managed._cuMemRangeGetLocation(0x1000, 64, last_prefetch=True)


# -- on the GPU -------------------------------------------------------------------------------

SCALE_KERNEL = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


def _is_managed(ptr: int) -> bool:
    """Whether ``ptr`` is live managed memory (a freed address is unknown to the driver)."""
    r = drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr)
    return r[0] is SUCCESS and bool(r[1])


def _concurrent(device: cu.Device) -> bool:
    return bool(device.attribute(DeviceAttribute.CONCURRENT_MANAGED_ACCESS))


@pytest.mark.gpu
def test_allocate_and_free(ctx: cu.Context) -> None:
    buf = ManagedBuffer(4096)
    assert isinstance(buf, cu.DeviceBuffer)
    assert buf.nbytes == 4096
    assert buf.owned
    assert buf.context == ctx
    assert _is_managed(buf.ptr)
    assert "ManagedBuffer" in repr(buf)
    ptr = buf.ptr
    buf.close()
    assert buf.closed
    assert not _is_managed(ptr)
    with ManagedBuffer(64, context=ctx) as other:
        assert _is_managed(other.ptr)


@pytest.mark.gpu
def test_host_writes_reach_kernels_and_copies(ctx: cu.Context, stream: cu.Stream) -> None:
    k = load_kernels(ctx, SCALE_KERNEL, "scale")["scale"]
    n = 1000
    buf = ManagedBuffer(4 * n)
    a = buf.array(np.float32)
    a[:] = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(buf.cast(np.float32).copy_to(), np.arange(n))
    k.launch(stream, (n + 255) // 256, 256, buf, 2.0, n)
    stream.synchronize()
    expect = 2 * np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(a, expect)  # the host sees what the kernel wrote
    np.testing.assert_array_equal(buf.cast(np.float32).copy_to(), expect)
    plan = k.prepare((n + 255) // 256, 256, buf, 0.5, n)
    plan.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(a, np.arange(n))


@pytest.mark.gpu
def test_copies_fills_and_views(ctx: cu.Context, stream: cu.Stream) -> None:
    buf = ManagedBuffer(256)
    buf.fill(7)
    assert (buf.array() == 7).all()
    data = np.arange(256, dtype=np.uint8)
    dev = cu.DeviceBuffer.from_array(data)
    buf.copy_from(dev)
    np.testing.assert_array_equal(buf.array(), data)
    out = cu.DeviceBuffer(256)
    out.copy_from(buf, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.copy_to(), data)
    v = buf.view(16, 16)
    v.fill(3, stream=stream)
    stream.synchronize()
    expect = data.copy()
    expect[16:32] = 3
    np.testing.assert_array_equal(buf.array(), expect)
    np.testing.assert_array_equal(buf[16:32].copy_to(), np.full(16, 3, np.uint8))
    cai = buf.cast(np.uint32).__cuda_array_interface__
    assert cai["data"] == (buf.ptr, False)
    assert cai["shape"] == (64,)


@pytest.mark.gpu
def test_from_array_and_empty(ctx: cu.Context, stream: cu.Stream) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = ManagedBuffer.from_array(a)
    assert type(buf) is ManagedBuffer
    assert (buf.dtype, buf.shape) == (a.dtype, a.shape)
    np.testing.assert_array_equal(buf.array(), a)
    np.testing.assert_array_equal(buf.copy_to(), a)
    later = ManagedBuffer.from_array(a, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(later.array(), a)
    e = ManagedBuffer.empty((2, 8), np.int32, attach=MemAttach.HOST)
    assert type(e) is ManagedBuffer
    assert e.array().shape == (2, 8)
    assert _is_managed(e.ptr)


@pytest.mark.gpu
def test_attach_host(ctx: cu.Context, device: cu.Device, stream: cu.Stream) -> None:
    if not _concurrent(device):
        pytest.skip("HOST-attached memory needs attaching to a stream on this device")
    k = load_kernels(ctx, SCALE_KERNEL, "scale")["scale"]
    buf = ManagedBuffer(64, attach=MemAttach.HOST)
    assert _is_managed(buf.ptr)
    a = buf.array(np.float32)
    a[:] = 1.5
    k.launch(stream, 1, 16, buf, 4.0, 16)
    stream.synchronize()
    np.testing.assert_array_equal(a, np.full(16, 6.0, np.float32))


@pytest.mark.gpu
def test_arrays_keep_the_memory_after_close(ctx: cu.Context) -> None:
    buf = ManagedBuffer(64)
    a = buf.array()
    a[:] = 9
    ptr = buf.ptr
    buf.close()
    assert buf.closed
    assert _is_managed(ptr)
    assert (a == 9).all()
    del a
    gc.collect()
    _handle.settle()  # the releasing thread may be running the release: wait for it
    assert not _is_managed(ptr)


@pytest.mark.gpu
def test_prefetch(ctx: cu.Context, device: cu.Device, stream: cu.Stream) -> None:
    if not _concurrent(device):
        pytest.skip("prefetching needs CONCURRENT_MANAGED_ACCESS")
    buf = ManagedBuffer(1 << 21)
    a = buf.array(np.uint32)
    a[:] = np.arange(a.size, dtype=np.uint32)
    assert buf.last_prefetch_location is None
    buf.prefetch(device, stream=stream)
    stream.synchronize()
    assert buf.last_prefetch_location is device
    buf.prefetch("host", stream=stream)
    stream.synchronize()
    assert buf.last_prefetch_location == "host"
    buf.prefetch(device.ordinal, stream=cu.Stream.legacy())  # named, never implied
    ctx.synchronize()
    assert buf.last_prefetch_location is device
    np.testing.assert_array_equal(a, np.arange(a.size, dtype=np.uint32))
    half = buf[: 1 << 20]
    half.prefetch("host", stream=stream)
    stream.synchronize()
    assert half.last_prefetch_location == "host"
    assert buf.last_prefetch_location is None  # not the same for the whole buffer


@pytest.mark.gpu
def test_read_mostly(ctx: cu.Context) -> None:
    buf = ManagedBuffer(1 << 16)
    assert buf.read_mostly is False
    buf.advise(MemAdvise.SET_READ_MOSTLY)
    assert buf.read_mostly is True
    buf.advise(drv.CUmem_advise.CU_MEM_ADVISE_UNSET_READ_MOSTLY)  # the bindings' member
    assert buf.read_mostly is False


@pytest.mark.gpu
def test_preferred_location(ctx: cu.Context, device: cu.Device) -> None:
    if not _concurrent(device):
        pytest.skip("a device as preferred location needs CONCURRENT_MANAGED_ACCESS")
    buf = ManagedBuffer(1 << 16)
    assert buf.preferred_location is None
    buf.advise(MemAdvise.SET_PREFERRED_LOCATION, device)
    assert buf.preferred_location is device
    buf.advise(MemAdvise.SET_PREFERRED_LOCATION, "host")
    assert buf.preferred_location == "host"
    buf.advise(MemAdvise.UNSET_PREFERRED_LOCATION)
    assert buf.preferred_location is None


@pytest.mark.gpu
def test_accessed_by(ctx: cu.Context, device: cu.Device) -> None:
    if not _concurrent(device):
        pytest.skip("SET_ACCESSED_BY a device needs CONCURRENT_MANAGED_ACCESS")
    buf = ManagedBuffer(1 << 16)
    assert buf.accessed_by == []
    buf.advise(MemAdvise.SET_ACCESSED_BY, device.ordinal)
    assert buf.accessed_by == [device]
    buf.advise(MemAdvise.UNSET_ACCESSED_BY, device)
    assert buf.accessed_by == []


@pytest.mark.gpu
def test_device_attributes_are_checked(
    ctx: cu.Context, device: cu.Device, stream: cu.Stream, monkeypatch: pytest.MonkeyPatch
) -> None:
    buf = ManagedBuffer(4096)
    monkeypatch.setitem(device._attrs, int(DeviceAttribute.CONCURRENT_MANAGED_ACCESS), 0)
    with pytest.raises(cu.NotSupportedError, match="CONCURRENT_MANAGED_ACCESS"):
        buf.prefetch(device, stream=stream)
    with pytest.raises(cu.NotSupportedError, match="^cuMemPrefetchAsync"):
        buf.prefetch("host", stream=stream)
    with pytest.raises(cu.NotSupportedError, match="^cuMemAdvise.*CONCURRENT_MANAGED_ACCESS"):
        buf.advise(MemAdvise.SET_PREFERRED_LOCATION, device)
    with pytest.raises(cu.NotSupportedError, match="CONCURRENT_MANAGED_ACCESS"):
        buf.advise(MemAdvise.SET_ACCESSED_BY, device)
    buf.advise(MemAdvise.SET_READ_MOSTLY)  # needs nothing
    assert buf.read_mostly is True
    monkeypatch.setitem(device._attrs, int(DeviceAttribute.MANAGED_MEMORY), 0)
    with pytest.raises(cu.NotSupportedError, match="MANAGED_MEMORY"):
        ManagedBuffer(64)


_NO_PREFETCH = "prefetching needs DeviceAttribute.CONCURRENT_MANAGED_ACCESS, 0 on this device"


@pytest.mark.gpu
def test_prefetch_on_another_stream_leaves_a_blocking_streams_capture_alone(
    ctx: cu.Context, device: cu.Device
) -> None:
    # prefetch(dev) used to go to the legacy default stream, which synchronises with
    # every blocking stream: a capture open on one broke (STREAM_CAPTURE_IMPLICIT).
    if not _concurrent(device):
        pytest.skip(_NO_PREFETCH)
    buf = ManagedBuffer(1 << 20)
    buf.array()[:] = 1
    capturing = cu.Stream()  # blocking, as cuStreamCreate(0) makes it
    assert not capturing.non_blocking
    other = cu.Stream()  # another blocking stream, not capturing
    work = cu.DeviceBuffer(256)
    errors: list[BaseException] = []

    def prefetch_on_other() -> None:
        try:
            ctx.set_current()
            buf.prefetch(device, stream=other)
        except BaseException as exc:
            errors.append(exc)

    capturing.begin_capture()
    try:
        t = threading.Thread(target=prefetch_on_other)  # another thread, another stream
        t.start()
        t.join(30)
        buf.prefetch("host", stream=other)  # this thread, another stream
        buf.prefetch(device, stream=other)
        work.fill(5, stream=capturing)
    finally:
        g = capturing.end_capture()  # raises if the capture was invalidated
    assert not t.is_alive() and not errors, errors
    other.synchronize()
    assert buf.last_prefetch_location is device  # the prefetches ran, outside the graph
    exe = g.instantiate()
    exe.launch(capturing)
    capturing.synchronize()
    assert (work.copy_to() == 5).all()
    assert (buf.array() == 1).all()
    del exe, g
    other.close()
    capturing.close()


@pytest.mark.gpu
def test_prefetch_on_the_capturing_stream_is_refused_and_the_capture_survives(
    ctx: cu.Context, device: cu.Device
) -> None:
    # The driver cannot capture a prefetch (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, which
    # breaks the capture): refused before the driver, the capture goes on.
    if not _concurrent(device):
        pytest.skip(_NO_PREFETCH)
    s = cu.Stream()
    buf = ManagedBuffer(1 << 20)
    buf.array(np.uint32)[:] = 7
    with s.capture() as g:
        with pytest.raises(cu.StreamCaptureError, match="cannot be captured"):
            buf.prefetch(device, stream=s)
        buf.fill(9, stream=s)
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    assert (buf.array(np.uint8) == 9).all()
    buf.prefetch(device, stream=s)  # outside the capture: fine
    s.synchronize()
    assert buf.last_prefetch_location is device
    del exe, g
    buf.close()
    s.close()
