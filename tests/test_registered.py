"""RegisteredMemory: memory the caller already has, page-locked (``cuMemHostRegister``).

The tests without the ``gpu`` marker check what is refused before any driver call (on a
machine without a driver, reaching the driver would raise ``DriverNotFoundError``
instead of the error each test expects), the registry of registered ranges, and the
borrowed form (``from_handle``), which makes no driver call.
"""

from __future__ import annotations

import array
import ctypes
import gc
import mmap
import pickle
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._memory import registered as _reg
from cudriver._memory.registered import host_span, registered_ranges

from ._support import CAI, FAKE, load_kernels, no_driver

ALREADY = drv.CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
PAGE = mmap.PAGESIZE

SOURCE = r"""
extern "C" __global__ void fill(unsigned* p, unsigned v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
extern "C" __global__ void spin_fill(unsigned* p, unsigned v, int n, long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
"""
#: Clock cycles of the long kernel: about half a second at 2 GHz, far longer than the
#: copies that run beside it (64 MiB at bus speed: a few milliseconds).
LONG = 1_000_000_000
#: Of the kernel a copy waits behind: about 0.1 s.
SHORT = 200_000_000


# -- refusals before any driver call ---------------------------------------------------------


def _fake_device_memory() -> cu.DeviceBuffer:
    return cu.DeviceBuffer.from_handle(FAKE, 64)


def _strided_memoryview() -> memoryview:
    strided: Any = np.zeros((4, 4), np.uint8)[:, ::2]
    return memoryview(strided)


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: b"read-only bytes", ValueError, "read_only=True"),
        (lambda: np.zeros((4, 4), np.float32)[:, ::2], ValueError, "non-contiguous"),
        (lambda: np.zeros(8)[::-1], ValueError, "non-contiguous"),
        (lambda: np.zeros((3, 0), np.float32), ValueError, "empty"),
        (lambda: bytearray(), ValueError, "empty"),
        (lambda: np.array([object(), object()]), TypeError, "Python objects"),
        (lambda: object(), TypeError, "buffer interface"),
        (lambda: 12345, TypeError, "buffer interface"),
        (lambda: CAI(), TypeError, "device memory"),
        (_fake_device_memory, TypeError, "device memory"),
        (_strided_memoryview, ValueError, "non-contiguous"),
    ],
    ids=[
        "bytes",
        "strided",
        "reversed",
        "empty-array",
        "empty-bytearray",
        "objects",
        "no-buffer",
        "int",
        "cai",
        "device-buffer",
        "strided-memoryview",
    ],
)
def test_refused_before_the_driver(make: Any, exc: type[Exception], match: str) -> None:
    obj = make()
    with pytest.raises(exc, match=match):
        cu.RegisteredMemory(obj)
    assert registered_ranges() == []


def test_read_only_numpy_array_and_mmap_are_refused_without_the_flag(tmp_path: Path) -> None:
    a = np.arange(16, dtype=np.float32)
    a.flags.writeable = False
    with pytest.raises(ValueError, match=r"read-only.*read_only=True"):
        cu.RegisteredMemory(a)
    frozen = np.frombuffer(b"\x01" * 64, np.uint8)
    with pytest.raises(ValueError, match="read_only=True"):
        cu.RegisteredMemory(frozen)
    path = tmp_path / "data.bin"
    path.write_bytes(b"\x02" * PAGE)
    with path.open("rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with pytest.raises(ValueError, match="mmap is read-only"):
        cu.RegisteredMemory(m)
    m.close()  # the refusal kept no export of it


def test_bad_options_are_refused_before_the_driver() -> None:
    a = np.zeros(16, np.uint8)
    with pytest.raises(TypeError, match="mapped"):
        cu.RegisteredMemory(a, mapped=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="portable"):
        cu.RegisteredMemory(a, portable=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read_only"):
        cu.RegisteredMemory(a, read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context"):
        cu.RegisteredMemory(a, context=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        cu.RegisteredMemory(a, True)  # type: ignore[call-arg]


def test_a_refused_bytearray_stays_resizable() -> None:
    ba = bytearray(b"abc")
    view = memoryview(ba)[::2]  # not contiguous
    with pytest.raises(ValueError, match="non-contiguous"):
        cu.RegisteredMemory(view)
    view.release()
    ba.extend(b"def")  # no export left behind
    assert len(ba) == 6


def test_host_span_views_the_memory_without_a_copy() -> None:
    f = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    u8, ro = host_span(f, read_only=False)
    assert u8.nbytes == f.nbytes and not ro
    assert u8.__array_interface__["data"][0] == f.__array_interface__["data"][0]
    np.testing.assert_array_equal(u8.view(np.float64), f.ravel(order="F"))
    d = array.array("d", [1.0, 2.0])
    u8, ro = host_span(d, read_only=False)
    assert u8.nbytes == 16 and not ro
    assert u8.__array_interface__["data"][0] == d.buffer_info()[0]
    u8, ro = host_span(b"xyz", read_only=True)
    assert ro and bytes(u8) == b"xyz"
    ba = bytearray(8)
    u8, _ = host_span(ba, read_only=False)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # the export locks it while the span lives
    del u8
    ba.extend(b"x")
    m = mmap.mmap(-1, PAGE)
    u8, _ = host_span(memoryview(m)[16:32], read_only=False)
    assert u8.nbytes == 16
    with pytest.raises(BufferError):
        m.close()
    del u8
    gc.collect()
    m.close()


@pytest.fixture
def clean_registry() -> Iterator[list[Any]]:
    """Reservations made by a test, forgotten at its end (fake addresses, no driver)."""
    made: list[Any] = []
    yield made
    for entry in made:
        _reg._forget(entry.start, entry.token)


def test_the_registry_refuses_overlaps(clean_registry: list[Any]) -> None:
    base = 0x7E0000000000
    clean_registry.append(_reg._reserve(base + 100, base + 200))
    clean_registry.append(_reg._reserve(base + 200, base + 300))  # adjacent: allowed
    clean_registry.append(_reg._reserve(base, base + 100))
    assert [r for r in registered_ranges() if r[0] >= base] == [
        (base, base + 100),
        (base + 100, base + 200),
        (base + 200, base + 300),
    ]
    for lo, hi in [(150, 160), (199, 201), (0, 1), (299, 400), (0, 1000), (50, 150)]:
        with pytest.raises(cu.CudaError, match="refused before the driver call") as info:
            _reg._reserve(base + lo, base + hi)
        assert info.value.code == ALREADY
        assert info.value.func == "cuMemHostRegister"
        assert f"[{base + lo:#x}, {base + hi:#x}) overlap" in str(info.value)
    ok = _reg._reserve(base + 300, base + 301)
    clean_registry.append(ok)
    _reg._forget(base + 300, ok.token + 1)  # another registration's token: kept
    assert (base + 300, base + 301) in registered_ranges()
    _reg._forget(base + 300, ok.token)
    assert (base + 300, base + 301) not in registered_ranges()


def test_from_handle_wraps_memory_registered_elsewhere() -> None:
    backing = (ctypes.c_uint8 * 64)()
    addr = ctypes.addressof(backing)
    r = cu.RegisteredMemory.from_handle(addr, 64, backing, mapped=False)
    assert not r.owned
    assert r.ptr == int(r) == addr
    assert r.nbytes == 64
    assert r.obj is backing
    assert not r.mapped and not r.read_only
    assert (
        repr(r) == f"<cudriver.RegisteredMemory {addr:#x} nbytes=64 of=c_ubyte_Array_64 borrowed>"
    )
    r.array(np.uint32)[:] = 7
    assert backing[0] == 7 and backing[60] == 7
    assert bytes(r.memoryview[:2]) == b"\x07\x00"
    assert r.array(np.uint32, (4, 4)).shape == (4, 4)
    assert np.asarray(r).nbytes == 64
    with pytest.raises(ValueError, match="whole number"):
        r.array(np.dtype("V3"))
    with pytest.raises(ValueError, match="not mapped"):
        r.device_ptr  # noqa: B018
    with pytest.raises(TypeError, match="cannot pickle"):
        pickle.dumps(r)
    keep = r.array()
    r.close()  # borrowed: nothing is unregistered
    assert r.closed
    assert repr(r) == "<cudriver.RegisteredMemory closed>"
    for use in (r.array, lambda: r.memoryview, lambda: r.obj, lambda: r.device_ptr):
        with pytest.raises(cu.ClosedError, match="RegisteredMemory is closed"):
            use()
    keep[0] = 9  # arrays made before close() still view the memory
    assert backing[0] == 9
    with pytest.raises(ValueError, match="NULL"):
        cu.RegisteredMemory.from_handle(0, 8)
    with pytest.raises(ValueError):
        cu.RegisteredMemory.from_handle(-1, 8)
    with pytest.raises(TypeError):
        cu.RegisteredMemory.from_handle("x", 8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nbytes"):
        cu.RegisteredMemory.from_handle(addr, 0)


def test_it_is_public_and_host_memory() -> None:
    from cudriver._lifetime._coerce import HostMemory

    assert cu.RegisteredMemory.__module__ == "cudriver"
    assert "RegisteredMemory" in cu.__all__
    assert issubclass(cu.RegisteredMemory, HostMemory)  # what copies take as page-locked


@no_driver
def test_without_a_driver_nothing_is_left_registered() -> None:
    ba = bytearray(64)
    with pytest.raises(cu.DriverNotFoundError):
        cu.RegisteredMemory(ba)
    assert registered_ranges() == []
    ba.extend(b"x")  # the export was let go


# -- with a GPU ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernels(primary: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(primary, SOURCE, "fill", "spin_fill")


def _span(a: Any) -> tuple[int, int]:
    u8, _ = host_span(a, read_only=True)
    p = int(u8.__array_interface__["data"][0])
    return p, p + u8.nbytes


@pytest.mark.gpu
def test_registered_array_copies_asynchronously_while_a_kernel_runs(
    ctx: cu.Context, kernels: dict[str, cu.Kernel]
) -> None:
    n = 1 << 24  # 64 MiB of float32
    a = np.arange(n, dtype=np.float32)
    back = np.zeros_like(a)
    reg = cu.RegisteredMemory(a)
    reg_back = cu.RegisteredMemory(back, mapped=False)
    assert reg.ptr == a.ctypes.data and reg.nbytes == a.nbytes
    assert reg.obj is a and reg.mapped and reg.portable and not reg.read_only
    assert reg.context == ctx
    assert repr(reg).endswith(f"nbytes={a.nbytes} mapped portable of=ndarray owned>")
    assert _span(a) in registered_ranges()
    dev = cu.DeviceBuffer(a.nbytes)
    dev2 = cu.DeviceBuffer(a.nbytes)
    rows = cu.DeviceBuffer(4096 * 64)
    flag = cu.DeviceBuffer(4)
    flag.fill(0)
    s_kernel = cu.Stream(non_blocking=True)
    s_copy = cu.Stream(non_blocking=True)
    start, k_done, c_done = (cu.Event(timing=True) for _ in range(3))
    try:
        start.record(s_kernel)
        kernels["spin_fill"].launch(s_kernel, 1, 1, flag, np.uint32(1), 1, LONG)
        k_done.record(s_kernel)
        # Beside the kernel, on another stream: host to device from the registration.
        dev.copy_from(reg, stream=s_copy)
        c_done.record(s_copy)
        # Behind the kernel, on its stream: each call must return at once (a copy into
        # pageable memory returns only once it has run, i.e. after the kernel).
        t0 = time.perf_counter()
        dev2.copy_from(reg, stream=s_kernel)
        dev2.copy_to(out=reg_back, stream=s_kernel)
        cu.copy_2d(rows, reg, width_bytes=4096, height=64, src_pitch=8192, stream=s_kernel)
        enqueue_s = time.perf_counter() - t0
        assert not k_done.query(), (
            f"enqueueing the copies waited for the kernel ({enqueue_s:.3f} s): they were not "
            "treated as page-locked memory"
        )
        c_done.synchronize()
        assert not k_done.query(), "the copy beside the kernel did not overlap it"
        got_dev = dev.copy_to(stream=s_copy)
        s_copy.synchronize()
        np.testing.assert_array_equal(got_dev.view(np.float32), a)
        s_kernel.synchronize()
        assert start.elapsed_ms(c_done) < start.elapsed_ms(k_done)
        np.testing.assert_array_equal(back, a)
        got = rows.copy_to().view(np.float32).reshape(64, 1024)
        np.testing.assert_array_equal(got, a[: 64 * 2048].reshape(64, 2048)[:, :1024])
        # The registered array is still the same numpy array, and (as a plain ndarray
        # operand) still page-locked for the driver: the copy behind the kernel returns
        # at once.
        back[:] = 0
        kernels["spin_fill"].launch(s_kernel, 1, 1, flag, np.uint32(2), 1, LONG)
        k_done.record(s_kernel)
        dev2.copy_to(out=back, stream=s_kernel)
        assert not k_done.query()
        s_kernel.synchronize()
        np.testing.assert_array_equal(back, a)
    finally:
        s_kernel.synchronize()
        s_copy.synchronize()
    reg.close()
    reg_back.close()
    assert reg.closed and repr(reg) == "<cudriver.RegisteredMemory closed>"
    assert _span(a) not in registered_ranges()
    with pytest.raises(cu.ClosedError):
        dev.copy_from(reg, stream=s_copy)
    with pytest.raises(cu.ClosedError):
        reg.array()
    reg.close()  # idempotent


@pytest.mark.gpu
def test_device_mapped_access_through_device_ptr(
    ctx: cu.Context, stream: cu.Stream, kernels: dict[str, cu.Kernel]
) -> None:
    a = np.zeros(256, np.uint32)
    reg = cu.RegisteredMemory(a)
    dp = reg.device_ptr
    assert dp != 0 and reg.device_ptr == dp
    view = reg.device_buffer()
    assert view.ptr == dp and view.nbytes == a.nbytes
    kernels["fill"].launch(stream, 1, 256, view, np.uint32(7), 256)
    stream.synchronize()
    assert (a == 7).all()  # the kernel wrote the user's array
    assert (reg.array(np.uint32) == 7).all()
    # A device-to-device copy reads the host memory through its device address.
    a[:] = np.arange(256, dtype=np.uint32)
    buf = cu.DeviceBuffer(a.nbytes)
    buf.copy_from(view, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(buf.copy_to().view(np.uint32), a)
    # close() while the device view lives: unusable at once, unregistered once it is gone.
    reg.close()
    assert reg.closed
    assert _span(a) in registered_ranges()
    kernels["fill"].launch(stream, 1, 256, view, np.uint32(3), 256)
    stream.synchronize()
    assert (a == 3).all()
    del view
    gc.collect()
    stream.synchronize()  # runs the queued release
    deadline = time.monotonic() + 10
    while _span(a) in registered_ranges() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _span(a) not in registered_ranges()
    again = cu.RegisteredMemory(a)  # unregistered: it can be registered again
    again.close()
    unmapped = cu.RegisteredMemory(a, mapped=False)
    assert not unmapped.mapped
    with pytest.raises(ValueError, match="not mapped"):
        unmapped.device_ptr  # noqa: B018
    with pytest.raises(ValueError, match="not mapped"):
        unmapped.device_buffer()
    unmapped.close()


@pytest.mark.gpu
def test_bytearray_registration_locks_its_size_until_close(
    ctx: cu.Context, stream: cu.Stream
) -> None:
    # 1 MiB each: malloc maps them apart, so the two registrations share no page.
    ba = bytearray(bytes(range(256)) * 4096)
    reg = cu.RegisteredMemory(ba)
    assert reg.obj is ba and "of=bytearray" in repr(reg)
    dev = cu.DeviceBuffer(len(ba))
    dev.copy_from(reg, stream=stream)
    out = bytearray(len(ba))
    out_reg = cu.RegisteredMemory(out)
    dev.copy_to(out_reg, stream=stream)
    stream.synchronize()
    assert out == ba
    with pytest.raises(BufferError):
        ba.extend(b"x")  # a registered bytearray cannot move
    reg.array()[:4] = np.frombuffer(b"ABCD", np.uint8)  # numpy onto the same bytes
    assert ba[:4] == b"ABCD"
    reg.close()
    out_reg.close()
    ba.extend(b"x")  # the export went with the registration
    out.append(0)
    assert len(ba) == len(out) == (1 << 20) + 1


@pytest.mark.gpu
def test_mmap_registration(ctx: cu.Context, stream: cu.Stream) -> None:
    m = mmap.mmap(-1, 1 << 16)
    m[:8] = b"mmapdata"
    reg = cu.RegisteredMemory(m)
    assert reg.ptr % PAGE == 0 and reg.nbytes == 1 << 16
    dev = cu.DeviceBuffer(reg.nbytes)
    dev.copy_from(reg, stream=stream)
    dev.fill(0x5A, stream=stream)
    dev.copy_to(reg, stream=stream)
    stream.synchronize()
    assert m[:8] == b"\x5a" * 8
    with pytest.raises(BufferError):
        m.close()  # registered: it cannot be unmapped
    reg.close()
    m.close()


@pytest.mark.gpu
def test_adjacent_pages_register_and_overlaps_are_refused(ctx: cu.Context) -> None:
    m = mmap.mmap(-1, 3 * PAGE)
    mv = memoryview(m)
    r1 = cu.RegisteredMemory(mv[:PAGE])
    r2 = cu.RegisteredMemory(mv[PAGE : 2 * PAGE])
    before = registered_ranges()
    with pytest.raises(cu.CudaError, match="overlap") as info:
        cu.RegisteredMemory(mv[PAGE // 2 : PAGE + PAGE // 2])
    assert info.value.code == ALREADY
    assert repr(r1) in str(info.value) and repr(r2) in str(info.value)
    with pytest.raises(cu.CudaError, match="overlap"):
        cu.RegisteredMemory(mv[:PAGE])  # the same span again
    del info
    assert registered_ranges() == before
    r1.close()
    with pytest.raises(cu.CudaError, match="overlap"):
        cu.RegisteredMemory(mv)  # still overlaps r2
    r2.close()
    whole = cu.RegisteredMemory(mv)
    whole.close()
    del r1, r2, whole
    gc.collect()
    mv.release()
    m.close()


@pytest.mark.gpu
def test_numpy_overlap_is_refused_naming_the_registration(ctx: cu.Context) -> None:
    a = np.zeros(1 << 16, np.uint8)
    r1 = cu.RegisteredMemory(a[:40000])
    with pytest.raises(cu.CudaError, match="refused before the driver call") as info:
        cu.RegisteredMemory(a[30000:50000])
    assert info.value.code == ALREADY
    assert "RegisteredMemory" in str(info.value) and "close()" in str(info.value)
    del info
    r1.close()
    r2 = cu.RegisteredMemory(a[30000:50000])
    r2.close()


@pytest.mark.gpu
def test_pinned_memory_is_refused(ctx: cu.Context) -> None:
    pin = cu.PinnedBuffer(4096)
    with pytest.raises(ValueError, match="PinnedBuffer"):
        cu.RegisteredMemory(pin.array())
    with pytest.raises(ValueError, match="PinnedBuffer"):
        cu.RegisteredMemory(pin)
    # The same memory, reached without cudriver knowing it: the driver refuses it.
    raw = (ctypes.c_char * 4096).from_address(pin.ptr)
    before = registered_ranges()
    with pytest.raises(cu.CudaError, match="page-locked already") as info:
        cu.RegisteredMemory(raw)
    # (ALREADY_REGISTERED, or INVALID_VALUE as the CUDA 13.0 driver says for memory of
    # cuMemHostAlloc: measured)
    assert info.value.code in (ALREADY, drv.CUresult.CUDA_ERROR_INVALID_VALUE)
    assert info.value.func == "cuMemHostRegister"
    del info, raw
    assert registered_ranges() == before
    pin.close()


@pytest.mark.gpu
def test_read_only_registration(ctx: cu.Context, stream: cu.Stream, tmp_path: Path) -> None:
    data = bytes(range(256)) * 16
    with pytest.raises(ValueError, match="read_only=True"):
        cu.RegisteredMemory(data)
    if not ctx.device.attribute(cu.DeviceAttribute.READ_ONLY_HOST_REGISTER_SUPPORTED):
        with pytest.raises(cu.NotSupportedError, match="READ_ONLY_HOST_REGISTER_SUPPORTED"):
            cu.RegisteredMemory(data, read_only=True)
        assert registered_ranges() == []
        return
    reg = cu.RegisteredMemory(data, read_only=True)
    assert reg.read_only and "read_only" in repr(reg)
    buf = cu.DeviceBuffer(len(data))
    buf.copy_from(reg, stream=stream)
    stream.synchronize()
    assert buf.copy_to().tobytes() == data
    with pytest.raises(ValueError, match="read-only"):
        reg.array()[0] = 1  # numpy keeps bytes immutable
    reg.close()
    # A file mapped read-only.
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    with path.open("rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with pytest.raises(ValueError, match="read_only=True"):
        cu.RegisteredMemory(m)
    reg = cu.RegisteredMemory(m, read_only=True)
    buf.fill(0)
    buf.copy_from(reg, stream=stream)
    stream.synchronize()
    assert buf.copy_to().tobytes() == data
    reg.close()
    m.close()
    # A writable array registered for the device to read only.
    a = np.arange(64, dtype=np.uint8)
    reg = cu.RegisteredMemory(a, read_only=True)
    small = cu.DeviceBuffer(64)
    small.copy_from(reg, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(small.copy_to(), a)
    reg.close()


@pytest.mark.gpu
def test_dropping_with_a_copy_in_flight_waits_for_it(
    ctx: cu.Context, kernels: dict[str, cu.Kernel]
) -> None:
    n = 1 << 22
    a = np.arange(n, dtype=np.uint32)
    span = _span(a)
    buf = cu.DeviceBuffer(a.nbytes)
    flag = cu.DeviceBuffer(4)
    s = cu.Stream(non_blocking=True)
    try:
        # Dropped: the release is queued, and waits for the copy before unregistering.
        reg = cu.RegisteredMemory(a)
        kernels["spin_fill"].launch(s, 1, 1, flag, np.uint32(1), 1, SHORT)
        buf.copy_from(reg, stream=s)
        ref = weakref.ref(reg)
        del reg
        gc.collect()
        assert ref() is None
        s.synchronize()
        np.testing.assert_array_equal(buf.copy_to().view(np.uint32), a)
        deadline = time.monotonic() + 10
        while span in registered_ranges() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert span not in registered_ranges()
        # Closed: close() returns only once the copy has run.
        buf.fill(0)
        reg = cu.RegisteredMemory(a)
        kernels["spin_fill"].launch(s, 1, 1, flag, np.uint32(1), 1, SHORT)
        buf.copy_from(reg, stream=s)
        copied = s.record()
        reg.close()
        assert copied.query(), "close() unregistered the memory under a copy in flight"
        assert span not in registered_ranges()
        np.testing.assert_array_equal(buf.copy_to().view(np.uint32), a)
    finally:
        s.synchronize()
        s.close()


@pytest.mark.gpu
def test_a_graph_keeps_the_registration(ctx: cu.Context, stream: cu.Stream) -> None:
    a = np.arange(1024, dtype=np.float32)
    span = _span(a)
    reg = cu.RegisteredMemory(a)
    buf = cu.DeviceBuffer(a.nbytes)
    with stream.capture() as g:
        buf.copy_from(reg, stream=stream)
    reg.close()  # the graph still copies from it: unregistered once the graph is gone
    assert reg.closed
    assert span in registered_ranges()
    exe = g.instantiate()
    buf.fill(0)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(buf.copy_to().view(np.float32), a)
    exe.close()
    g.close()
    del exe, g
    gc.collect()
    stream.synchronize()
    deadline = time.monotonic() + 10
    while span in registered_ranges() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert span not in registered_ranges()
