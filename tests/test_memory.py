from __future__ import annotations

import gc
import pickle
import sys
import warnings
import weakref
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import DeviceBuffer, PinnedBuffer, SupportsCudaArrayInterface
from cudriver._lifetime._coerce import dtype_arg as _dtype_arg
from cudriver._lifetime._coerce import shape_arg as _shape_arg
from cudriver._memory._copy import fill_args as _fill_args
from cudriver._memory._copy import parse_cai as _parse_cai

from ._support import CAI, FAKE, import_or_skip, keeps_alive


def fake(nbytes: int = 64, ptr: int = FAKE) -> DeviceBuffer:
    """A borrowed buffer over the fake address: for checks made before any driver call."""
    return DeviceBuffer.from_handle(ptr, nbytes)


# -- argument validation before any driver call -----------------------------------------


@pytest.mark.parametrize(
    ("nbytes", "exc"),
    [
        (0, ValueError),
        (-1, ValueError),
        ("x", TypeError),
        (1.5, TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_bad_nbytes_raise_before_the_driver(nbytes: Any, exc: type[Exception]) -> None:
    with pytest.raises(exc, match="nbytes"):
        DeviceBuffer(nbytes)
    with pytest.raises(exc, match="nbytes"):
        PinnedBuffer(nbytes)


def test_nbytes_accepts_numpy_integers_in_validation() -> None:
    with pytest.raises(ValueError, match="positive"):
        DeviceBuffer(np.int64(0))


def test_bad_context_and_stream_raise_before_the_driver() -> None:
    with pytest.raises(TypeError, match="context"):
        DeviceBuffer(8, context="ctx")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stream"):
        DeviceBuffer(8, stream="s")
    with pytest.raises(TypeError, match="context"):
        PinnedBuffer(8, context=3)  # type: ignore[arg-type]


def test_from_array_validation() -> None:
    with pytest.raises(ValueError, match="C-contiguous"):
        DeviceBuffer.from_array(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        DeviceBuffer.from_array(np.zeros((4, 3), np.float32, order="F"))
    with pytest.raises(ValueError, match="empty"):
        DeviceBuffer.from_array(np.zeros((3, 0), np.float32))
    with pytest.raises(TypeError, match="Python objects"):
        DeviceBuffer.from_array(np.array([object(), object()]))
    with pytest.raises(TypeError, match="host array"):
        DeviceBuffer.from_array(fake())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="host array"):
        DeviceBuffer.from_array(CAI())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="context"):
        DeviceBuffer.from_array(np.ones(4), context=1)  # type: ignore[arg-type]


def test_empty_validation() -> None:
    with pytest.raises(ValueError, match="no elements"):
        DeviceBuffer.empty((0,), np.float32)
    with pytest.raises(ValueError, match="negative"):
        DeviceBuffer.empty((2, -1))
    with pytest.raises(TypeError, match="shape"):
        DeviceBuffer.empty("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="shape entry"):
        DeviceBuffer.empty((2.0,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Python objects"):
        DeviceBuffer.empty(4, object)
    with pytest.raises(TypeError, match="dtype"):
        DeviceBuffer.empty(4, "not-a-dtype")


def test_shape_and_dtype_helpers() -> None:
    assert _shape_arg(5) == (5,)
    assert _shape_arg(np.int32(5)) == (5,)
    assert _shape_arg([2, 3]) == (2, 3)
    assert _shape_arg(()) == ()
    with pytest.raises(TypeError):
        _shape_arg((True,))
    assert _dtype_arg("<f4") == np.float32
    assert _dtype_arg(np.int64).itemsize == 8
    with pytest.raises(ValueError, match="no size"):
        _dtype_arg("V0")


def test_fill_value_helper() -> None:
    assert _fill_args(0xAB, None) == (1, 0xAB)
    assert _fill_args(0xFFFF, 2) == (2, 0xFFFF)
    assert _fill_args(np.uint16(0x1234), None) == (2, 0x1234)
    assert _fill_args(np.uint32(7), 4) == (4, 7)
    assert _fill_args(np.float32(1.0), None) == (4, 0x3F800000)
    assert _fill_args(np.int16(-1), None) == (2, 0xFFFF)
    assert _fill_args(np.uint8(255), None) == (1, 255)
    with pytest.raises(ValueError, match="does not fit"):
        _fill_args(256, None)
    with pytest.raises(ValueError, match="does not fit"):
        _fill_args(-1, None)
    with pytest.raises(ValueError, match="does not fit"):
        _fill_args(1 << 16, 2)
    with pytest.raises(ValueError, match="does not fit"):
        _fill_args(1 << 32, 4)
    with pytest.raises(ValueError, match="element_size"):
        _fill_args(1, 3)
    with pytest.raises(TypeError, match="element_size"):
        _fill_args(1, 2.0)
    with pytest.raises(ValueError, match="but element_size=4"):
        _fill_args(np.uint16(1), 4)
    with pytest.raises(ValueError, match="8 bytes"):
        _fill_args(np.float64(1.0), None)
    with pytest.raises(TypeError, match=r"np\.float32"):
        _fill_args(1.5, None)
    with pytest.raises(TypeError, match="bool"):
        _fill_args(True, None)
    with pytest.raises(TypeError):
        _fill_args("1", None)


def test_parse_cai_helper() -> None:
    d = CAI().__cuda_array_interface__
    assert _parse_cai(d, "src") == (FAKE, 64, False, None)
    # Explicit C-contiguous strides and size-1 dimensions with any stride are contiguous.
    d2 = dict(d, shape=(2, 1, 8), strides=(32, 999, 4), stream=5)
    assert _parse_cai(d2, "src") == (FAKE, 64, False, 5)
    with pytest.raises(ValueError, match="not C-contiguous"):
        _parse_cai(dict(d, shape=(4, 4), strides=(4, 16)), "src")
    with pytest.raises(ValueError, match="masked"):
        _parse_cai(dict(d, mask=object()), "src")
    with pytest.raises(ValueError, match="malformed"):
        _parse_cai({"version": 3, "data": (FAKE, False)}, "src")
    with pytest.raises(ValueError, match="strides"):
        _parse_cai(dict(d, strides=(4, 4)), "src")
    with pytest.raises(TypeError, match="not a dict"):
        _parse_cai([1, 2], "src")


# -- borrowed buffers over a fake address: no driver needed ----------------------------------


def test_from_handle_properties_and_cai() -> None:
    b = fake(64)
    assert b.ptr == FAKE
    assert int(b) == FAKE
    assert isinstance(b.handle, drv.CUdeviceptr)
    assert int(b.handle) == FAKE
    assert b.nbytes == 64
    assert not b.owned
    assert b.stream is None
    assert b.base is None
    assert b.offset == 0
    assert b.dtype == np.uint8
    assert b.shape == (64,)
    assert isinstance(b, SupportsCudaArrayInterface)
    assert b.__cuda_array_interface__ == {
        "version": 3,
        "shape": (64,),
        "typestr": "|u1",
        "data": (FAKE, False),
        "strides": None,
        "stream": None,
    }
    assert DeviceBuffer.from_handle(drv.CUdeviceptr(FAKE), 8).ptr == FAKE


def test_from_handle_validation() -> None:
    with pytest.raises(ValueError, match="NULL"):
        DeviceBuffer.from_handle(0, 8)
    with pytest.raises(TypeError, match="ptr"):
        DeviceBuffer.from_handle("x", 8)
    with pytest.raises(ValueError, match="nbytes"):
        DeviceBuffer.from_handle(FAKE, 0)
    with pytest.raises(TypeError, match="context"):
        DeviceBuffer.from_handle(FAKE, 8, context="c")  # type: ignore[arg-type]


def test_from_handle_keeps_owner_alive() -> None:
    keeps_alive(lambda owner: DeviceBuffer.from_handle(FAKE, 8, owner))


def test_repr_equality_hash() -> None:
    b = fake(64)
    assert repr(b) == f"<cudriver.DeviceBuffer {FAKE:#x} nbytes=64 borrowed>"
    assert b == fake(32)  # same address
    assert hash(b) == hash(fake(32))
    assert b != fake(64, FAKE + 64)
    assert b != FAKE
    assert len({b, fake(64), fake(64, FAKE + 64)}) == 2
    c = b.cast(np.float32, (4, 4))
    assert "dtype=float32 shape=(4, 4)" in repr(c)
    b.close()
    assert repr(b) == "<cudriver.DeviceBuffer closed>"
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(fake())


def test_views_and_slices() -> None:
    b = fake(64)
    v = b.view(16)
    assert (v.ptr, v.nbytes, v.offset, v.base) == (FAKE + 16, 48, 16, b)
    assert v.base is b
    assert not v.owned
    v2 = b.view(8, 8)
    assert (v2.ptr, v2.nbytes) == (FAKE + 8, 8)
    s = b[10:20]
    assert (s.ptr, s.nbytes, s.offset) == (FAKE + 10, 10, 10)
    assert b[-8:].ptr == FAKE + 56
    assert b[:].nbytes == 64
    assert b[60:1000].nbytes == 4
    vv = s.view(2, 4)  # a view of a view points into the root allocation
    assert (vv.ptr, vv.nbytes, vv.offset) == (FAKE + 12, 4, 12)
    assert vv.base is b
    assert vv[1:3].ptr == FAKE + 13
    assert v.__cuda_array_interface__["shape"] == (48,)
    assert v.__cuda_array_interface__["data"] == (FAKE + 16, False)
    assert "view+16" in repr(v)


def test_view_errors() -> None:
    b = fake(64)
    with pytest.raises(ValueError, match="outside"):
        b.view(64)
    with pytest.raises(ValueError, match="outside"):
        b.view(-1)
    with pytest.raises(ValueError, match="exceeds"):
        b.view(60, 8)
    with pytest.raises(ValueError, match="nbytes"):
        b.view(0, 0)
    with pytest.raises(TypeError, match="offset"):
        b.view(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step 1"):
        b[::2]
    with pytest.raises(ValueError, match="empty"):
        b[10:5]
    with pytest.raises(ValueError, match="empty"):
        b[64:]
    with pytest.raises(TypeError, match="byte slices"):
        b[3]


def test_cast() -> None:
    b = fake(64)
    c = b.cast(np.float32)
    assert (c.dtype, c.shape, c.ptr, c.nbytes) == (np.float32, (16,), FAKE, 64)
    cai = b.cast("<i8", (2, 4)).__cuda_array_interface__
    assert (cai["shape"], cai["typestr"]) == ((2, 4), "<i8")
    rec = np.dtype([("a", "<i4"), ("b", "<f4")])
    cai = b.cast(rec).__cuda_array_interface__
    assert cai["typestr"] == rec.str
    assert cai["descr"] == rec.descr
    with pytest.raises(ValueError, match="whole number"):
        fake(10).cast(np.float32)
    with pytest.raises(ValueError, match="needs 32 bytes"):
        b.cast(np.float32, (8,))
    with pytest.raises(TypeError, match="Python objects"):
        b.cast(object)


def test_closing_the_parent_closes_views() -> None:
    b = fake(64)
    v = b[8:16]
    vv = v.view(4)
    c = b.cast(np.int32)
    w = b.view(0)
    w.close()  # closing a view leaves the parent and other views alone
    assert w.closed
    assert not b.closed
    assert not v.closed
    b.close()
    for x in (b, v, vv, c):
        assert x.closed
        with pytest.raises(cu.ClosedError, match="DeviceBuffer is closed"):
            x.copy_to()
        with pytest.raises(cu.ClosedError):
            x.copy_from(np.zeros(x.nbytes, np.uint8))
        with pytest.raises(cu.ClosedError):
            x.fill(0)
        with pytest.raises(cu.ClosedError):
            x.view(0)
        with pytest.raises(cu.ClosedError):
            x[0:1]
        with pytest.raises(cu.ClosedError):
            x.cast(np.uint8)
        with pytest.raises(cu.ClosedError):
            x.__cuda_array_interface__  # noqa: B018
        with pytest.raises(cu.ClosedError):
            int(x)
        with pytest.raises(cu.ClosedError):
            x.ptr  # noqa: B018
        with pytest.raises(cu.ClosedError):
            x.handle  # noqa: B018
    b.close()  # idempotent
    assert v.nbytes == 8  # Python state stays readable


def test_with_closes() -> None:
    with fake(16) as b:
        v = b[0:4]
        assert not b.closed
    assert b.closed
    assert v.closed


def test_closed_operands_raise() -> None:
    b = fake(16)
    other = fake(16, FAKE + 4096)
    other.close()
    with pytest.raises(cu.ClosedError):
        b.copy_from(other)
    with pytest.raises(cu.ClosedError):
        b.copy_to(other)


def test_copy_errors_raise_before_the_driver() -> None:
    b = fake(64)
    with pytest.raises(ValueError, match="size mismatch: src has 24 bytes"):
        b.copy_from(np.zeros(3))
    with pytest.raises(ValueError, match="size mismatch: out has 32 bytes"):
        b.copy_to(np.zeros(4))
    with pytest.raises(ValueError, match="size mismatch"):
        b.copy_from(b"abc")
    with pytest.raises(ValueError, match="size mismatch"):
        b.copy_from(b"")
    with pytest.raises(ValueError, match="size mismatch"):
        b.copy_from(fake(32, FAKE + 4096))
    with pytest.raises(ValueError, match="size mismatch"):
        b.copy_to(fake(65, FAKE + 4096))
    with pytest.raises(ValueError, match="size mismatch"):
        b.copy_from(CAI(shape=(15,)))
    with pytest.raises(ValueError, match="C-contiguous"):
        b.copy_from(np.zeros((8, 2), np.float64)[:, :1])
    with pytest.raises(ValueError, match="C-contiguous"):
        b.copy_to(np.zeros((4, 4), np.float32).T)
    with pytest.raises(ValueError, match="non-contiguous"):
        b.copy_from(memoryview(bytes(128))[::2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        b.copy_from(CAI(shape=(4, 4), strides=(4, 16)))
    ro = np.zeros(64, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only array"):
        b.copy_to(ro)
    with pytest.raises(ValueError, match="read-only buffer"):
        b.copy_to(bytes(64))
    with pytest.raises(ValueError, match="read-only"):
        b.copy_to(CAI(data=(FAKE + 4096, True)))
    with pytest.raises(TypeError, match="Python objects"):
        b.copy_from(np.array([object()] * 8))
    with pytest.raises(TypeError, match="src must be"):
        b.copy_from(3)
    with pytest.raises(TypeError, match="out must be"):
        b.copy_to(object())
    # A valid operand but a bad stream: still caught before any driver call.
    with pytest.raises(TypeError, match="stream"):
        b.copy_from(np.zeros(64, np.uint8), stream="nope")
    with pytest.raises(TypeError, match="stream"):
        b.copy_to(bytearray(64), stream=1.5)


def test_fill_errors_raise_before_the_driver() -> None:
    b = fake(64)
    with pytest.raises(ValueError, match="does not fit"):
        b.fill(256)
    with pytest.raises(ValueError, match="does not fit"):
        b.fill(-1)
    with pytest.raises(ValueError, match="does not fit"):
        b.fill(70000, element_size=2)
    with pytest.warns(DeprecationWarning, match=r"fill\(element_size=\.\.\.\)"):
        with pytest.raises(ValueError, match="does not fit"):
            b.fill(70000, width=2)
    with pytest.raises(TypeError, match="not both"):
        b.fill(1, width=2, element_size=2)
    with pytest.raises(TypeError):
        b.fill(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        b.fill(False)
    with pytest.raises(ValueError, match="multiple of the element size 4"):
        fake(6).fill(1, element_size=4)
    with pytest.raises(ValueError, match="multiple of the element size 2"):
        fake(7).fill(np.uint16(1))
    with pytest.raises(ValueError, match="aligned"):
        b[1:5].fill(np.uint32(1))
    with pytest.raises(ValueError, match="element_size"):
        b.fill(1, element_size=8)
    with pytest.raises(TypeError, match="stream"):
        b.fill(1, stream="nope")


# -- on the GPU ----------------------------------------------------------------------------

SHAPES = [(), (1,), (1000,), (3, 5), (2, 3, 4)]


def _data(dtype: Any, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(sum(shape) + 7)
    if np.dtype(dtype).kind == "f":
        return np.asarray(rng.standard_normal(shape), dtype=dtype)
    return np.asarray(rng.integers(-(1 << 40), 1 << 40, size=shape), dtype=dtype)


def _freed(ptr: int) -> bool:
    r = drv.cuPointerGetAttribute(drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_CONTEXT, ptr)
    return r[0] is not drv.CUresult.CUDA_SUCCESS


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip(ctx: cu.Context, dtype: Any, shape: tuple[int, ...]) -> None:
    a = _data(dtype, shape)
    buf = DeviceBuffer.from_array(a)
    assert (buf.nbytes, buf.dtype, buf.shape) == (a.nbytes, a.dtype, a.shape)
    assert buf.owned
    assert buf.context == ctx
    out = buf.copy_to()
    assert out.dtype == a.dtype
    assert out.shape == a.shape
    np.testing.assert_array_equal(out, a)
    # Into a given array, and back through an untyped buffer.
    out2 = np.empty_like(a)
    assert buf.copy_to(out2) is out2
    np.testing.assert_array_equal(out2, a)
    raw = DeviceBuffer(a.nbytes)
    raw.copy_from(a)
    got = raw.copy_to()
    assert got.dtype == np.uint8
    assert got.shape == (a.nbytes,)
    np.testing.assert_array_equal(got.view(dtype).reshape(shape), a)
    buf.close()
    raw.close()


@pytest.mark.gpu
def test_bytes_like_and_device_to_device(ctx: cu.Context) -> None:
    payload = bytes(range(256))
    a = DeviceBuffer(256)
    a.copy_from(payload)
    ba = bytearray(256)
    a.copy_to(ba)
    assert bytes(ba) == payload
    mv = memoryview(bytearray(256))
    a.copy_to(mv)
    assert mv.tobytes() == payload
    b = DeviceBuffer(256)
    b.copy_from(a)  # device to device
    c = DeviceBuffer.empty((64,), np.uint32)
    a.copy_to(c)
    np.testing.assert_array_equal(c.copy_to(), np.frombuffer(payload, np.uint32))
    assert b.copy_to().tobytes() == payload
    d = DeviceBuffer.from_array([1.0, 2.0, 3.0])
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d.copy_to(), [1.0, 2.0, 3.0])


@pytest.mark.gpu
def test_async_copies_on_a_stream(ctx: cu.Context, stream: cu.Stream) -> None:
    a = np.arange(1 << 16, dtype=np.float32)
    buf = DeviceBuffer(a.nbytes)
    buf.copy_from(a, stream=stream)
    other = DeviceBuffer(a.nbytes)
    other.copy_from(buf, stream=stream)
    out = np.empty_like(a)
    other.copy_to(out, stream=stream)
    res = buf.cast(np.float32).copy_to(stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, a)
    np.testing.assert_array_equal(res, a)
    # A foreign stream handle works too.
    out2 = np.empty_like(a)
    buf.copy_to(out2, stream=int(stream))
    stream.synchronize()
    np.testing.assert_array_equal(out2, a)


@pytest.mark.gpu
def test_fill(ctx: cu.Context, stream: cu.Stream) -> None:
    buf = DeviceBuffer(64)
    buf.fill(0xAB)
    assert (buf.copy_to() == 0xAB).all()
    buf.fill(np.uint16(0x1234))
    assert (buf.copy_to().view(np.uint16) == 0x1234).all()
    buf.fill(0xDEADBEEF, element_size=4)
    assert (buf.copy_to().view(np.uint32) == 0xDEADBEEF).all()
    buf.fill(np.float32(1.5))
    assert (buf.copy_to().view(np.float32) == 1.5).all()
    buf.fill(np.int16(-2))
    assert (buf.copy_to().view(np.int16) == -2).all()
    buf.fill(0)
    buf[8:16].fill(9)
    expect = np.zeros(64, np.uint8)
    expect[8:16] = 9
    np.testing.assert_array_equal(buf.copy_to(), expect)
    buf.fill(7, stream=stream)
    stream.synchronize()
    assert (buf.copy_to() == 7).all()


@pytest.mark.gpu
def test_views_on_device(ctx: cu.Context) -> None:
    a = np.arange(256, dtype=np.uint8)
    buf = DeviceBuffer.from_array(a)
    v = buf.view(16, 32)
    np.testing.assert_array_equal(v.copy_to(), a[16:48])
    np.testing.assert_array_equal(buf[-8:].copy_to(), a[-8:])
    np.testing.assert_array_equal(v[4:8].copy_to(), a[20:24])
    v.copy_from(np.full(32, 255, np.uint8))  # writes through to the parent
    expect = a.copy()
    expect[16:48] = 255
    np.testing.assert_array_equal(buf.copy_to(), expect)
    assert v.context == buf.context
    # A view keeps the allocation alive after the parent is dropped.
    ref = weakref.ref(buf)
    ptr = buf.ptr
    del buf
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(v.copy_to(), np.full(32, 255, np.uint8))
    del v
    gc.collect()
    assert ref() is None
    ctx.synchronize()  # runs the release that waited for an ordinary cudriver call
    assert _freed(ptr)


@pytest.mark.gpu
def test_close_frees_and_views_report_closed(ctx: cu.Context) -> None:
    buf = DeviceBuffer(1024)
    ptr = buf.ptr
    assert not _freed(ptr)
    v = buf[0:16]
    buf.close()
    assert _freed(ptr)
    assert v.closed
    with pytest.raises(cu.ClosedError):
        v.copy_to()
    buf2 = DeviceBuffer(1024)
    ptr2 = buf2.ptr
    del buf2
    gc.collect()
    ctx.synchronize()  # runs the release that waited for an ordinary cudriver call
    assert _freed(ptr2)


@pytest.mark.gpu
def test_from_handle_on_device(ctx: cu.Context) -> None:
    buf = DeviceBuffer.from_array(np.arange(16, dtype=np.int32))
    w = DeviceBuffer.from_handle(buf.ptr, buf.nbytes, buf)
    assert w == buf
    assert hash(w) == hash(buf)
    assert w.context == ctx  # looked up with cuPointerGetAttribute
    np.testing.assert_array_equal(w.copy_to().view(np.int32), np.arange(16))
    w.close()
    assert not buf.closed


@pytest.mark.gpu
def test_stream_ordered_alloc_and_free(ctx: cu.Context, stream: cu.Stream) -> None:
    a = np.arange(1024, dtype=np.int64)
    buf = DeviceBuffer(a.nbytes, stream=stream)
    assert buf.stream is stream
    assert buf.context == ctx
    assert buf.__cuda_array_interface__["stream"] == int(stream)
    assert "stream-ordered" in repr(buf)
    buf.copy_from(a)  # synchronous, on the buffer's own stream
    np.testing.assert_array_equal(buf.copy_to().view(np.int64), a)
    v = buf[0:8]
    assert v.stream is stream
    assert v.__cuda_array_interface__["stream"] == int(stream)
    buf.close()  # cuMemFreeAsync on the stream
    assert v.closed
    stream.synchronize()

    b2 = DeviceBuffer.from_array(a, stream=stream)
    assert b2.stream is stream
    out = b2.copy_to(stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out, a)
    b2.close()

    b3 = DeviceBuffer(64, stream=int(stream))  # a foreign handle is wrapped
    assert b3.stream == stream
    b3.close()
    stream.synchronize()


@pytest.mark.gpu
def test_stream_ordered_buffer_keeps_its_stream(ctx: cu.Context) -> None:
    s = cu.Stream(context=ctx)
    buf = DeviceBuffer(64, stream=s)
    ref = weakref.ref(s)
    del s
    gc.collect()
    assert ref() is not None
    buf.fill(3)
    buf.close()
    del buf
    gc.collect()
    assert ref() is None


@pytest.mark.gpu
def test_stream_closed_before_buffer(ctx: cu.Context) -> None:
    s = cu.Stream(context=ctx)
    buf = DeviceBuffer(64, stream=s)
    s.close()
    with pytest.raises(cu.ClosedError, match="stream"):
        buf.copy_to()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        buf.close()  # falls back to freeing after a context synchronize
    assert not caught


@pytest.mark.gpu
def test_out_of_memory(ctx: cu.Context) -> None:
    with pytest.raises(cu.OutOfMemoryError):
        DeviceBuffer(1 << 50)


@pytest.mark.gpu
def test_device_errors(ctx: cu.Context) -> None:
    buf = DeviceBuffer.from_array(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match="size mismatch"):
        buf.copy_from(np.zeros(15, np.float32))
    with pytest.raises(ValueError, match="size mismatch"):
        buf.copy_to(np.zeros(17, np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.copy_from(np.zeros((4, 8), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="C-contiguous"):
        buf.copy_to(np.zeros((4, 8), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="nbytes"):
        DeviceBuffer(0, context=ctx)
    with pytest.raises(ValueError, match="nbytes"):
        DeviceBuffer(-8, context=ctx)
    buf.close()
    with pytest.raises(cu.ClosedError):
        buf.copy_from(np.zeros((4, 4), np.float32))
    with pytest.raises(cu.ClosedError):
        buf.copy_to()
    with pytest.raises(cu.ClosedError):
        buf.fill(0)
    with pytest.raises(cu.ClosedError):
        DeviceBuffer(64).copy_from(buf)


# -- pinned memory -----------------------------------------------------------------------


@pytest.mark.gpu
def test_pinned_array_and_copies(ctx: cu.Context, stream: cu.Stream) -> None:
    pin = PinnedBuffer(4096)
    assert pin.mapped
    assert pin.portable
    assert pin.context == ctx
    assert pin.ptr == int(pin) != 0
    assert "mapped portable" in repr(pin)
    host = pin.array(np.float32)
    assert host.shape == (1024,)
    assert host.__array_interface__["data"][0] == pin.ptr
    host[:] = np.arange(1024, dtype=np.float32)
    assert pin.array(np.float32, (32, 32))[1, 0] == 32.0
    buf = DeviceBuffer(4096)
    buf.copy_from(pin)
    np.testing.assert_array_equal(buf.copy_to().view(np.float32), host)
    # Async copies through pinned memory, both ways.
    out = PinnedBuffer(4096, mapped=False)
    assert not out.mapped
    buf2 = DeviceBuffer(4096)
    buf2.copy_from(pin, stream=stream)
    buf2.copy_to(out, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.array(np.float32), host)
    # A numpy view of pinned memory is an ordinary host operand.
    buf2.fill(0)
    buf2.copy_from(host, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(buf2.copy_to().view(np.float32), host)
    np.asarray(pin).view(np.float32)[1] = 42.0
    assert host[1] == 42.0
    if sys.version_info >= (3, 12):
        mv = memoryview(pin)
        assert mv.nbytes == 4096
        assert not mv.readonly
    with pytest.raises(ValueError, match="whole number"):
        PinnedBuffer(6).array(np.float32)
    with pytest.raises(ValueError, match="needs"):
        pin.array(np.float32, (10,))


@pytest.mark.gpu
def test_pinned_mapped_device_pointer(ctx: cu.Context) -> None:
    pin = PinnedBuffer(256)
    pin.array(np.int32)[:] = np.arange(64, dtype=np.int32)
    dp = pin.device_ptr
    assert dp != 0
    assert pin.device_ptr == dp
    dev = pin.device_buffer()
    assert dev.ptr == dp
    buf = DeviceBuffer(256)
    buf.copy_from(dev)  # a device-to-device copy that reads the host memory
    np.testing.assert_array_equal(buf.copy_to().view(np.int32), np.arange(64))
    wrapped = DeviceBuffer.from_handle(dp, 256, pin)
    buf.fill(0)
    buf.copy_from(wrapped)
    np.testing.assert_array_equal(buf.copy_to().view(np.int32), np.arange(64))
    # Writing through the device pointer is seen on the host.
    buf.fill(np.int32(-5))
    buf.copy_to(dev)
    assert (pin.array(np.int32) == -5).all()
    unmapped = PinnedBuffer(64, mapped=False)
    with pytest.raises(ValueError, match="not mapped"):
        unmapped.device_ptr  # noqa: B018
    with pytest.raises(ValueError, match="not mapped"):
        unmapped.device_buffer()


@pytest.mark.gpu
def test_pinned_array_outlives_the_buffer(ctx: cu.Context) -> None:
    a = PinnedBuffer(64).array(np.float64)
    gc.collect()
    a[:] = 1.5
    assert a.sum() == 12.0
    b = a[2:4]
    del a
    gc.collect()
    b[:] = 2.0
    assert b.sum() == 4.0
    # close() with an array alive: the buffer is closed, the memory stays until the
    # array is gone.
    pin = PinnedBuffer(64)
    arr = pin.array()
    ref = weakref.ref(pin)
    pin.close()
    assert pin.closed
    assert repr(pin) == "<cudriver.PinnedBuffer closed>"
    arr[:] = 3
    assert int(arr.sum()) == 192
    with pytest.raises(cu.ClosedError):
        pin.array()
    with pytest.raises(cu.ClosedError):
        pin.device_ptr  # noqa: B018
    with pytest.raises(cu.ClosedError):
        DeviceBuffer(64).copy_from(pin)
    del pin
    gc.collect()
    assert ref() is not None  # the array still holds it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del arr
        gc.collect()
    assert not caught
    assert ref() is None
    with PinnedBuffer(16) as p:
        assert not p.closed
    assert p.closed


@pytest.mark.gpu
def test_capture_keeps_host_memory_alive(ctx: cu.Context, stream: cu.Stream) -> None:
    pin = PinnedBuffer(256)
    host = pin.array(np.float32)
    host[:] = np.arange(64, dtype=np.float32)
    buf = DeviceBuffer(256)
    with stream.capture() as g:
        buf.copy_from(host, stream=stream)
    ref = weakref.ref(pin)
    del host, pin
    gc.collect()
    assert ref() is not None  # held by the graph
    r = drv.cuGraphInstantiate(g.handle, 0)
    assert r[0] == drv.CUresult.CUDA_SUCCESS
    exe = r[1]
    try:
        buf.fill(0)
        assert drv.cuGraphLaunch(exe, stream.handle)[0] == drv.CUresult.CUDA_SUCCESS
        stream.synchronize()
        np.testing.assert_array_equal(buf.copy_to().view(np.float32), np.arange(64))
    finally:
        drv.cuGraphExecDestroy(exe)
    g.close()
    del g
    gc.collect()
    assert ref() is None


# -- interoperability ----------------------------------------------------------------------


@pytest.mark.gpu
def test_cupy_reads_and_writes_a_device_buffer(ctx: cu.Context, stream: cu.Stream) -> None:
    cupy = import_or_skip("cupy")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = DeviceBuffer.from_array(a)
    c = cupy.asarray(buf)
    assert c.shape == (3, 4)
    assert c.dtype == np.float32
    assert c.data.ptr == buf.ptr
    np.testing.assert_array_equal(cupy.asnumpy(c), a)
    c *= 2
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(buf.copy_to(), a * 2)
    raw = cupy.asarray(DeviceBuffer(16))
    assert (raw.dtype, raw.shape) == (np.uint8, (16,))
    # A stream-ordered buffer advertises its stream; CuPy synchronises with it.
    so = DeviceBuffer.from_array(a, stream=stream)
    np.testing.assert_array_equal(cupy.asnumpy(cupy.asarray(so)), a)
    # CuPy arrays as copy operands, also while CuPy works on a stream of its own.
    src = cupy.arange(12, dtype=cupy.float32) + 100
    buf.copy_from(src)
    np.testing.assert_array_equal(buf.copy_to().ravel(), np.arange(12) + 100)
    with cupy.cuda.Stream(non_blocking=True):
        big = cupy.arange(1 << 20, dtype=cupy.float32) * 3
        dst = DeviceBuffer(big.nbytes)
        dst.copy_from(big)  # waits for CuPy's stream as the interface requires
        back = cupy.empty_like(big)
        dst.copy_to(back)
        ok = bool((back == big).all())
    assert ok
    np.testing.assert_array_equal(dst.cast(np.float32).copy_to()[:4], [0.0, 3.0, 6.0, 9.0])


@pytest.mark.gpu
def test_torch_reads_a_device_buffer(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = DeviceBuffer.from_array(a)
    t = torch.as_tensor(buf, device="cuda")
    assert tuple(t.shape) == (3, 4)
    assert t.dtype == torch.float32
    assert t.data_ptr() == buf.ptr
    np.testing.assert_array_equal(t.cpu().numpy(), a)
    t.mul_(3)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(buf.copy_to(), a * 3)
    i64 = DeviceBuffer.from_array(np.arange(5, dtype=np.int64))
    assert torch.as_tensor(i64, device="cuda").tolist() == [0, 1, 2, 3, 4]
    # A tensor as a copy source and destination.
    src = torch.arange(12, dtype=torch.float32, device="cuda") - 1
    torch.cuda.synchronize()
    buf.copy_from(src)
    np.testing.assert_array_equal(buf.copy_to().ravel(), np.arange(12) - 1)
    dst = torch.zeros(12, dtype=torch.float32, device="cuda")
    buf.copy_to(dst)
    assert dst.tolist() == [float(x) for x in np.arange(12) - 1]


@pytest.mark.gpu
@pytest.mark.parametrize("during", ["nothing", "a capture on another stream"])
def test_dropped_stream_ordered_buffers_are_freed(
    ctx: cu.Context, stream: cu.Stream, during: str
) -> None:
    # A stream-ordered buffer dropped without close() is freed (cuMemFreeAsync): in
    # place when nothing forbids it, else by the releasing
    # thread; beside a capture it waits for the capture's end and leaves it intact.
    from cudriver._lifetime import _handle

    pool = cu.MemoryPool.default()
    stream.synchronize()
    before = pool.used_current
    other = cu.Stream()
    capturing = during != "nothing"
    if capturing:
        # RELAXED: the allocations below are refused beside a GLOBAL capture (by the
        # driver: cuMemAllocAsync on another stream is CAPTURE_UNSUPPORTED there).
        other.begin_capture(cu.CaptureMode.RELAXED)
    try:
        for _ in range(200):
            cu.DeviceBuffer(1 << 20, stream=stream)  # dropped at once
        if not capturing:
            assert _handle.pending_releases() == 0  # none was queued
    finally:
        if capturing:
            other.end_capture().close()
    stream.synchronize()
    assert pool.used_current <= before
    other.close()


# -- sharing, .device, keyword-only stream -------------------------------------------------


def test_from_array_takes_the_stream_by_keyword() -> None:
    with pytest.raises(TypeError, match="positional"):
        DeviceBuffer.from_array(np.ones(4), 0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="stream"):
        DeviceBuffer.from_array(np.ones(4), stream="s")


def test_export_and_import_handle_are_checked_before_the_driver() -> None:
    buf = fake()
    with pytest.raises(ValueError, match="not allocated from a cudriver.MemoryPool.*ipc=True"):
        buf.export_handle()
    with pytest.raises(ValueError, match="view"):
        buf[8:16].export_handle()
    with pytest.raises(TypeError, match="pool must be a cudriver.MemoryPool"):
        DeviceBuffer.import_handle(bytes(64), 64, pool=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="pool must be a cudriver.MemoryPool"):
        DeviceBuffer.import_handle(bytes(64), 64, pool=buf)  # type: ignore[arg-type]
    buf.close()
    with pytest.raises(cu.ClosedError, match="DeviceBuffer is closed"):
        buf.export_handle()


@pytest.mark.gpu
def test_every_buffer_knows_its_device(ctx: cu.Context, stream: cu.Stream) -> None:
    dev = ctx.device
    plain = DeviceBuffer(64)
    ordered = DeviceBuffer(64, stream=stream)
    assert plain.device is dev and ordered.device is dev and plain[8:16].device is dev
    borrowed = DeviceBuffer.from_handle(plain.ptr, 64)  # asks the driver for its context
    assert borrowed.device is dev
    pinned = PinnedBuffer(64)
    assert pinned.device is dev and pinned.device_buffer().device is dev
    if dev.attribute(cu.DeviceAttribute.MANAGED_MEMORY):
        managed = cu.ManagedBuffer(64)
        assert managed.device is dev and managed[0:8].device is dev
        with pytest.raises(ValueError, match="ManagedBuffer was not allocated from a"):
            managed.export_handle()
        managed.close()
    for b in (plain, ordered):  # neither comes from a cudriver.MemoryPool
        with pytest.raises(ValueError, match="not allocated from a cudriver.MemoryPool"):
            b.export_handle()
    borrowed.close()
    plain.close()
    ordered.close()
    pinned.close()
    stream.synchronize()
