"""StridedView: layouts from numpy, DLPack and the CUDA Array Interface; kernels; copies.

The CPU tests read layouts (numpy arrays, numpy's own DLPack capsules, fake CUDA
producers) and check every refusal that comes before the driver. The GPU tests pass
transposed PyTorch tensors and sliced CuPy arrays to kernels and copy them.
"""

from __future__ import annotations

import gc
import struct
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._launch._packing import PackedArgs, pack_arg, pack_fast
from cudriver._memory._dlpack import FLAG_READ_ONLY
from cudriver._memory.strided import copy_shape

from ._support import CAI, FAKE, import_or_skip, keeps_alive, load_kernels
from .test_dlpack import DELETED, FakeProducer, OldProducer, capsule_name

A = np.arange(48, dtype=np.float32).reshape(6, 8)


class HostDLPack:
    """Only ``__dlpack__`` and ``__dlpack_device__`` of a numpy array (kDLCPU)."""

    def __init__(self, a: np.ndarray, *, old: bool = False) -> None:
        self.a = a
        self.old = old
        self.calls: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.a.__dlpack_device__()

    def __dlpack__(self, **kw: Any) -> Any:
        self.calls.append(kw)
        if self.old and "max_version" in kw:
            raise TypeError("unexpected keyword argument 'max_version'")
        return self.a.__dlpack__(**kw)


@pytest.fixture
def deleted() -> Any:
    gc.collect()
    DELETED.clear()
    yield DELETED
    DELETED.clear()


# -- host layouts ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "shape", "strides", "c", "f"),
    [
        (lambda a: a, (6, 8), (8, 1), True, False),
        (lambda a: a.T, (8, 6), (1, 8), False, True),
        (lambda a: a[::2, 1:], (3, 7), (16, 1), False, False),
        (lambda a: a[::-1], (6, 8), (-8, 1), False, False),
        (lambda a: a[:, 3], (6,), (8,), False, False),
        (lambda a: a[2:3, :], (1, 8), (8, 1), True, True),
    ],
)
def test_numpy_layouts(make: Any, shape: Any, strides: Any, c: bool, f: bool) -> None:
    x = make(A)
    v = cu.StridedView(x)
    assert (v.shape, v.strides, v.dtype, v.itemsize) == (shape, strides, A.dtype, 4)
    assert v.strides_bytes == x.strides
    assert v.ptr == x.ctypes.data  # element [0, ..., 0], also with negative strides
    assert (v.is_c_contiguous, v.is_f_contiguous) == (c, f)
    assert (v.size, v.nbytes, v.ndim) == (x.size, x.nbytes, x.ndim)
    assert (v.is_device, v.device, v.readonly) == (False, None, False)
    assert v.obj is x
    lo = sum(st * (n - 1) for n, st in zip(x.shape, x.strides, strict=True) if st < 0)
    assert v.span[0] == x.ctypes.data + lo
    assert "StridedView float32" in repr(v) and "host" in repr(v)


def test_span_covers_the_gaps() -> None:
    v = cu.StridedView(A[::2, 1:3])  # rows 0, 2, 4; columns 1..2
    assert v.span == (A.ctypes.data + 4, (4 * 8 + 2) * 4)
    r = cu.StridedView(A[::-1, ::-1])
    assert r.span == (A.ctypes.data, A.nbytes)
    assert r.ptr == A.ctypes.data + A.nbytes - 4


def test_zero_size_and_zero_dim() -> None:
    e = cu.StridedView(np.empty((0, 3), np.int16))
    assert (e.shape, e.size, e.nbytes, e.span[1]) == ((0, 3), 0, 0, 0)
    assert e.is_c_contiguous and e.is_f_contiguous
    s = cu.StridedView(np.array(7.0))
    assert (s.shape, s.strides, s.size, s.nbytes) == ((), (), 1, 8)


def test_readonly_numpy_and_buffers() -> None:
    r = A.copy()
    r.flags.writeable = False
    assert cu.StridedView(r).readonly
    b = cu.StridedView(b"abcdef")
    assert (b.readonly, b.shape, b.dtype) == (True, (6,), np.dtype(np.uint8))
    assert not cu.StridedView(bytearray(4)).readonly
    m = cu.StridedView(memoryview(bytearray(12)).cast("i"))
    assert (m.shape, m.dtype, m.readonly) == ((3,), np.dtype(np.int32), False)


class _Holder:
    """Host memory (``__array_interface__``) whose exporter keeps ``owner``."""

    def __init__(self, owner: object) -> None:
        self.owner = owner
        self.array = np.zeros(4)
        self.__array_interface__ = self.array.__array_interface__


def test_the_view_keeps_its_producer(deleted: list[int]) -> None:
    keeps_alive(lambda owner: cu.StridedView(_Holder(owner)))
    keeps_alive(lambda owner: cu.StridedView(_owned(FakeProducer(np.zeros(4)), owner)))
    keeps_alive(lambda owner: cu.StridedView(_owned(CAI(), owner)))
    keeps_alive(lambda owner: cu.StridedView(_owned(HostDLPack(np.zeros(4)), owner)))
    assert len(deleted) == 1  # the fake CUDA producer's deleter, called once


def _owned(producer: Any, owner: object) -> Any:
    producer.owner = owner
    return producer


def test_a_view_of_a_view_shares_its_fields() -> None:
    v = cu.StridedView(A.T)
    w = cu.StridedView(v)
    assert (w.ptr, w.shape, w.strides, w.obj) == (v.ptr, v.shape, v.strides, v)


@pytest.mark.parametrize(
    ("obj", "words"),
    [(object(), "not object"), (None, "not NoneType"), (np.array([None, 1]), "Python objects")],
)
def test_what_is_refused(obj: Any, words: str) -> None:
    with pytest.raises(TypeError, match=words):
        cu.StridedView(obj)


def test_byte_strides_that_are_not_whole_elements_are_refused() -> None:
    rec = np.zeros(4, dtype=[("a", "<i4"), ("b", "<i2")])  # packed: 6-byte records
    field = rec["a"]  # int32 with a stride of 6 bytes
    with pytest.raises(ValueError, match="multiples of its item size"):
        cu.StridedView(field)


# -- DLPack ----------------------------------------------------------------------------------


def test_host_dlpack_strided_and_without_a_stream() -> None:
    p = HostDLPack(A[::2, 1:])
    v = cu.StridedView(p, stream=cu.Stream.from_handle(0x1230))
    assert (v.shape, v.strides, v.ptr, v.is_device) == ((3, 7), (16, 1), A.ctypes.data + 4, False)
    assert p.calls == [{"stream": None, "max_version": (1, 0)}]  # host: stream=None
    assert v.obj is p


def test_host_dlpack_negative_strides_and_readonly() -> None:
    r = A.copy()
    r.flags.writeable = False
    v = cu.StridedView(HostDLPack(r[::-1]))
    assert v.strides == (-8, 1)
    assert v.ptr == r[::-1].ctypes.data
    assert v.readonly  # DLPack 1.0's read-only flag


def test_host_dlpack_producer_without_max_version() -> None:
    p = HostDLPack(A.T, old=True)
    v = cu.StridedView(p)
    assert v.strides == (1, 8)
    assert p.calls[-1] == {"stream": None}


@pytest.mark.parametrize("versioned", [True, False])
def test_device_dlpack_strided_and_consumed(deleted: list[int], versioned: bool) -> None:
    a = np.zeros(48, np.float32)
    p = FakeProducer(a, shape=(8, 6), strides=(1, 8), versioned=versioned, device=(2, 1))
    v = cu.StridedView(p)
    assert (v.shape, v.strides, v.ptr) == ((8, 6), (1, 8), a.ctypes.data)
    assert (v.is_device, v.device, v.readonly, v.is_f_contiguous) == (True, 1, False, True)
    assert p.streams == [1]  # None: the legacy default stream
    assert capsule_name(p.capsule).startswith("used_")
    assert "device=1" in repr(v)
    del v
    gc.collect()
    assert len(deleted) == 1  # the producer's deleter, once the view is gone


@pytest.mark.parametrize(("stream", "passed"), [(None, 1), (0, 1), (2, 2), (-1, -1), (0x99, 0x99)])
def test_device_dlpack_passes_the_consumers_stream(
    stream: Any, passed: int, deleted: list[int]
) -> None:
    p = FakeProducer(np.zeros(4, np.float32))
    cu.StridedView(p, stream=stream)
    assert p.streams == [passed]


def test_device_dlpack_readonly_and_old_producers(deleted: list[int]) -> None:
    a = np.zeros(12, np.float32)
    v = cu.StridedView(FakeProducer(a, flags=FLAG_READ_ONLY, shape=(3, 2), strides=(4, 2)))
    assert v.readonly and v.strides == (4, 2)
    old = OldProducer(np.zeros(6, np.int16), shape=(2, 3), strides=(1, 2))
    o = cu.StridedView(old)
    assert (o.strides, o.readonly, capsule_name(old.capsule)) == ((1, 2), False, "used_dltensor")


def test_device_dlpack_byte_offset_is_added(deleted: list[int]) -> None:
    a = np.arange(8, dtype=np.int64)
    v = cu.StridedView(FakeProducer(a, byte_offset=64))
    assert v.ptr == a.ctypes.data


def test_device_dlpack_negative_strides_and_zero_size(deleted: list[int]) -> None:
    a = np.zeros(12, np.float32)
    v = cu.StridedView(FakeProducer(a[11:], shape=(12,), strides=(-1,)))  # from the end
    assert (v.strides, v.ptr, v.span) == ((-1,), a.ctypes.data + 44, (a.ctypes.data, 48))
    empty = cu.StridedView(FakeProducer(a, shape=(0, 5)))
    assert (empty.size, empty.nbytes, empty.span[1]) == (0, 0, 0)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"device": (10, 0)}, "kDLROCM"),
        ({"dtype": (4, 16, 1), "shape": (24,)}, "bfloat16"),
        ({"major": 2}, "DLPack 2.0"),
        ({"shape": (3, -4)}, "negative"),
    ],
)
def test_device_dlpack_refusals_leave_the_capsule(
    kwargs: dict[str, Any], words: str, deleted: list[int]
) -> None:
    p = FakeProducer(np.zeros(12, np.float32), **kwargs)
    with pytest.raises(BufferError, match=words):
        cu.StridedView(p)
    assert p.capsule is None or capsule_name(p.capsule) == "dltensor_versioned"
    gc.collect()
    assert deleted == []


def test_from_dlpack_refuses_strided_tensors_and_points_to_the_view(deleted: list[int]) -> None:
    p = FakeProducer(np.zeros(12, np.float32), shape=(4, 3), strides=(1, 4))
    with pytest.raises(BufferError, match=r"not C-contiguous.*StridedView"):
        cu.DeviceBuffer.from_dlpack(p)
    q = FakeProducer(np.zeros(12, np.float32), flags=FLAG_READ_ONLY)
    with pytest.raises(BufferError, match=r"read-only.*StridedView"):
        cu.DeviceBuffer.from_dlpack(q)


# -- CUDA Array Interface -----------------------------------------------------------------------


def test_cai_strided_readonly_and_no_driver_call_for_the_same_stream() -> None:
    c = CAI(shape=(3, 7), strides=(64, 4), data=(FAKE + 4, True), stream=1)
    v = cu.StridedView(c)  # its stream is the legacy stream, and so is the consumer's
    assert (v.ptr, v.shape, v.strides, v.strides_bytes) == (FAKE + 4, (3, 7), (16, 1), (64, 4))
    assert (v.readonly, v.is_device, v.dtype) == (True, True, np.dtype(np.float32))
    assert v.obj is c
    n = cu.StridedView(CAI(stream=0x1234), stream=-1)  # -1: no ordering at all
    assert n.shape == (16,)


def test_cai_c_order_and_zero_size() -> None:
    v = cu.StridedView(CAI(shape=(2, 8)))
    assert (v.strides, v.is_c_contiguous) == ((8, 1), True)
    e = cu.StridedView(CAI(None, shape=(0,)))
    assert (e.ptr, e.size, e.device) == (0, 0, None)


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"strides": (6, 4), "shape": (2, 2)}, ValueError, "multiples of its item size"),
        ({"version": 4}, ValueError, "version 4"),
        ({"mask": object()}, ValueError, "masked"),
        ({"stream": 0}, ValueError, "not a handle"),
        ({"strides": (4,), "shape": (2, 2)}, ValueError, "but strides"),
        ({"data": "nope"}, ValueError, "malformed"),
    ],
)
def test_cai_refusals(fields: dict[str, Any], error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        cu.StridedView(CAI(**fields))


# -- kernel arguments --------------------------------------------------------------------------


def test_device_views_pack_as_their_pointer_and_host_views_are_refused() -> None:
    v = cu.StridedView(CAI(shape=(4, 4), strides=(32, 4)))
    assert pack_arg(8, v) == struct.pack("<Q", FAKE)
    args = PackedArgs((8, 8, 8), (v, 4, 8))
    assert args.arg_bytes(0) == struct.pack("<Q", FAKE)
    buf = bytearray(8)
    pack_fast(buf, ((0, 8, 0),), (v,), "k")
    assert bytes(buf) == struct.pack("<Q", FAKE)
    host = cu.StridedView(A.T)
    with pytest.raises(TypeError, match=r"argument 0: a StridedView of host memory"):
        pack_arg(8, host, 0, "k")
    with pytest.raises(TypeError, match="StridedView of host memory"):
        pack_fast(bytearray(8), ((0, 8, 0),), (host,), "k")
    with pytest.raises(TypeError, match="8 bytes"):
        pack_arg(4, v)


def test_negative_strides_pack_element_zero(deleted: list[int]) -> None:
    a = np.zeros(12, np.float32)
    v = cu.StridedView(FakeProducer(a[11:], shape=(12,), strides=(-1,)))
    assert pack_arg(8, v) == struct.pack("<Q", a.ctypes.data + 44)


# -- which copies a 2D/3D copy can say ----------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "src", "dst", "expected"),
    [
        ((3, 4), (16, 4), (16, 4), (48, 1, 1, 48, 1, 48, 1)),  # contiguous: one row
        ((3, 7), (64, 4), (28, 4), (28, 3, 1, 64, 3, 28, 3)),  # a slice: 2D
        ((4, 3), (4, 16), (4, 16), (48, 1, 1, 48, 1, 48, 1)),  # transposed both: one block
        ((2, 3, 4), (240, 24, 4), (48, 16, 4), (16, 3, 2, 24, 10, 16, 3)),  # 3D
        ((2, 1, 3), (24, 999, 4), (12, 5, 4), (12, 2, 1, 24, 2, 12, 2)),  # extent 1 ignored
        ((5, 6), (4, 40), (4, 20), (20, 6, 1, 40, 6, 20, 6)),  # transposed slice, by stride
    ],
)
def test_copy_shapes(shape: Any, src: Any, dst: Any, expected: Any) -> None:
    assert tuple(copy_shape(shape, src, dst, 4)) == expected


@pytest.mark.parametrize(
    ("shape", "src", "dst", "words"),
    [
        ((4, 3), (4, 16), (12, 4), "innermost stride of src is 4 elements"),
        ((6,), (8,), (4,), "innermost stride of src is 2 elements"),
        ((3, 4), (-16, 4), (16, 4), "src has a negative stride"),
        ((3, 4), (16, 4), (16, -4), "dst has a negative stride"),
        ((3, 4), (0, 4), (16, 4), "stride 0"),
        ((3, 4), (8, 4), (16, 4), "rows of src overlap"),
        ((2, 3, 4), (100, 24, 4), (48, 16, 4), "slice stride of src"),
        ((2, 2, 2, 2), (256, 64, 16, 4), (32, 16, 8, 4), "4 strided dimensions"),
    ],
)
def test_copy_shapes_refused(shape: Any, src: Any, dst: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        copy_shape(shape, src, dst, 4)


# -- copies: what is checked before the driver ---------------------------------------------------


def test_copy_refusals_come_before_the_driver() -> None:
    r = A.copy()
    r.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cu.StridedView(r).copy_from(np.zeros_like(r))
    with pytest.raises(ValueError, match="read-only"):
        cu.StridedView(A).copy_to(cu.StridedView(r))
    with pytest.raises(ValueError, match="read-only"):
        cu.StridedView(A).copy_to(b"x" * A.nbytes)
    with pytest.raises(ValueError, match="size mismatch"):
        cu.StridedView(A[::2]).copy_to(np.empty(5, np.float32))
    with pytest.raises(ValueError, match="shape mismatch"):
        cu.StridedView(A[::2]).copy_to(cu.StridedView(np.empty((3, 7), np.float32)))
    with pytest.raises(ValueError, match="negative stride"):
        cu.StridedView(A[::-1]).copy_to()
    with pytest.raises(ValueError, match="innermost stride of src is 2 elements"):
        cu.StridedView(A[:, ::2]).copy_to()
    with pytest.raises(ValueError, match="innermost stride of dst is 3 elements"):
        # a strided numpy destination is taken as a view of its own layout
        cu.StridedView(A[::2]).copy_to(np.empty((8, 3), np.float32).T)
    with pytest.raises(TypeError, match="must be a numpy array"):
        cu.StridedView(A).copy_to(object())


def test_device_buffer_copies_hand_views_to_the_view() -> None:
    host = np.zeros(12, np.float32)
    buf = cu.DeviceBuffer.from_handle(host.ctypes.data, host.nbytes)  # no driver call
    with pytest.raises(ValueError, match="negative stride"):
        buf.copy_from(cu.StridedView(A[:3, :4][::-1]))
    with pytest.raises(ValueError, match="innermost stride of dst is 2 elements"):
        buf.copy_to(cu.StridedView(np.zeros((3, 8), np.float32)[:, ::2]))


def test_zero_size_copies_do_nothing() -> None:
    e = cu.StridedView(np.empty((0, 4), np.float32))
    out = e.copy_to()
    assert out.shape == (0, 4)
    e.copy_from(np.empty(0, np.float32))
    e.copy_to(cu.StridedView(np.empty((0, 4), np.float32).T.T))


def test_new_host_arrays_follow_the_views_order() -> None:
    v = cu.StridedView(A[:, 1:7].T)  # shape (6, 6), strides (1, 8)
    out = v._new_host_array()
    assert out.shape == (6, 6) and out.flags.f_contiguous
    assert cu.StridedView(A[::2])._new_host_array().flags.c_contiguous


# -- GPU ---------------------------------------------------------------------------------------

SRC = r"""
extern "C" __global__ void gather(float* out, const float* in, int rows, int cols,
                                  long long s0, long long s1) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) out[i] = in[(i / cols) * s0 + (i % cols) * s1];
}
extern "C" __global__ void scale(float* x, int rows, int cols, long long s0, long long s1,
                                 float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) x[(i / cols) * s0 + (i % cols) * s1] *= a;
}
extern "C" __global__ void slow_fill(float* x, float v, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""


@pytest.fixture(scope="module")
def k(primary: cu.Context) -> dict[str, cu.Kernel]:
    return load_kernels(primary, SRC, "gather", "scale", "slow_fill")


def _gather(k: dict[str, cu.Kernel], v: cu.StridedView, stream: Any = None) -> np.ndarray:
    """The view's elements in C order, read by a kernel through ``ptr`` and the strides."""
    rows, cols = v.shape
    out = cu.DeviceBuffer.empty(max(rows * cols, 1), np.float32)
    s = cu.Stream() if stream is None else stream
    k["gather"].launch(s, max(rows * cols, 1), 1, out, v, rows, cols, *v.strides)
    s.synchronize()
    return out.copy_to()[: rows * cols].reshape(rows, cols)


@pytest.mark.gpu
def test_transposed_torch_tensor_as_a_kernel_argument(ctx: cu.Context, k: dict) -> None:
    torch = import_or_skip("torch")
    t = torch.arange(12, dtype=torch.float32, device="cuda").reshape(3, 4).t()
    v = cu.StridedView(t)
    assert (v.shape, v.strides, v.ptr, v.device) == ((4, 3), (1, 4), t.data_ptr(), 0)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(_gather(k, v), expected)
    # written through the view: torch sees it
    s = cu.Stream()
    k["scale"].launch(s, 12, 1, v, 4, 3, *v.strides, 2.0)
    s.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), expected * 2)
    # in a launch plan and a graph kernel node
    out = cu.DeviceBuffer.empty(12, np.float32)
    plan = k["gather"].prepare(12, 1, out, v, 4, 3, *v.strides)
    plan.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(out.copy_to().reshape(4, 3), expected * 2)
    g = cu.Graph()
    g.add_kernel(k["scale"], 12, 1, v, 4, 3, *v.strides, 0.5)
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()
    np.testing.assert_array_equal(t.cpu().numpy(), expected)


@pytest.mark.gpu
def test_transposed_torch_tensor_as_a_copy_source(ctx: cu.Context) -> None:
    torch = import_or_skip("torch")
    base = np.arange(60, dtype=np.float32).reshape(6, 10)
    t = torch.from_numpy(base).cuda()
    for tt, ref in ((t.t(), base.T), (t[:, 2:7].t(), base[:, 2:7].T)):
        v = cu.StridedView(tt)
        got = v.copy_to()  # a new array in the view's order (Fortran order here)
        assert got.flags.f_contiguous
        np.testing.assert_array_equal(got, ref)
        dest = np.zeros(ref.shape[::-1], np.float32)
        v.copy_to(cu.StridedView(dest.T))  # a transposed destination, one 2D copy
        np.testing.assert_array_equal(dest.T, ref)
    with pytest.raises(ValueError, match="innermost stride of src is 10 elements"):
        cu.StridedView(t.t()).copy_to(np.empty((10, 6), np.float32))  # C order: a gather


@pytest.mark.gpu
def test_torch_producer_stream_is_honoured(ctx: cu.Context, k: dict) -> None:
    torch = import_or_skip("torch")
    ts = torch.cuda.Stream()
    s = cu.Stream()
    with torch.cuda.stream(ts):
        t = torch.zeros(64, 64, device="cuda")
        torch.cuda._sleep(20_000_000)
        t.fill_(5.0)
        v = cu.StridedView(t.t()[:, ::2], stream=s)  # s waits for ts
    got = _gather(k, v, stream=s)
    np.testing.assert_array_equal(got, np.full((64, 32), 5, np.float32))
    ts.synchronize()


@pytest.mark.gpu
def test_sliced_cupy_array_as_a_kernel_argument(ctx: cu.Context, k: dict) -> None:
    cupy = import_or_skip("cupy")
    full = cupy.arange(48, dtype=cupy.float32).reshape(6, 8)
    x = full[::2, 1:]
    cupy.cuda.Device().synchronize()
    ref = A[::2, 1:]
    for v in (cu.StridedView(x), cu.StridedView(_OnlyCAI(x))):
        assert (v.shape, v.strides, v.ptr, v.device) == ((3, 7), (16, 1), x.data.ptr, 0)
        np.testing.assert_array_equal(_gather(k, v), ref)
    s = cu.Stream()
    k["scale"].launch(s, 21, 1, cu.StridedView(x), 3, 7, 16, 1, -1.0)
    s.synchronize()
    expected = A.copy()
    expected[::2, 1:] *= -1
    np.testing.assert_array_equal(cupy.asnumpy(full), expected)


class _OnlyCAI:
    """A CuPy array seen through ``__cuda_array_interface__`` alone."""

    def __init__(self, x: Any) -> None:
        self.x = x
        self.__cuda_array_interface__ = x.__cuda_array_interface__


@pytest.mark.gpu
def test_sliced_cupy_array_as_a_copy_source_and_destination(ctx: cu.Context) -> None:
    cupy = import_or_skip("cupy")
    full = cupy.arange(48, dtype=cupy.float32).reshape(6, 8)
    x = full[::2, 1:]
    cupy.cuda.Device().synchronize()
    ref = A[::2, 1:]
    v = cu.StridedView(x)
    np.testing.assert_array_equal(v.copy_to(), ref)  # cuMemcpy2DAsync, device to host
    buf = cu.DeviceBuffer.empty((3, 7), np.float32)
    v.copy_to(buf)  # device to device
    np.testing.assert_array_equal(buf.copy_to(), ref)
    buf2 = cu.DeviceBuffer.empty((3, 7), np.float32)
    buf2.copy_from(v, stream=cu.Stream.legacy())  # handed to the view
    cu.Stream.legacy().synchronize()
    np.testing.assert_array_equal(buf2.copy_to(), ref)
    np.testing.assert_array_equal(cu.StridedView(_OnlyCAI(x)).copy_to(), ref)
    # into the view: only its elements change
    v.copy_from(np.full((3, 7), -1, np.float32))
    expected = A.copy()
    expected[::2, 1:] = -1
    np.testing.assert_array_equal(cupy.asnumpy(full), expected)
    # 3D: cuMemcpy3DAsync
    y = cupy.arange(120, dtype=cupy.float32).reshape(4, 5, 6)[::2, 1:4, 2:]
    cupy.cuda.Device().synchronize()
    ref3 = np.arange(120, dtype=np.float32).reshape(4, 5, 6)[::2, 1:4, 2:]
    np.testing.assert_array_equal(cu.StridedView(y).copy_to(), ref3)
    back = cupy.zeros((4, 5, 6), cupy.float32)
    cu.StridedView(back[::2, 1:4, 2:]).copy_from(np.ascontiguousarray(ref3))
    cupy.cuda.Device().synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(back)[::2, 1:4, 2:], ref3)


@pytest.mark.gpu
def test_cai_producer_stream_is_honoured(ctx: cu.Context, k: dict) -> None:
    cupy = import_or_skip("cupy")
    cs = cupy.cuda.Stream(non_blocking=True)
    producer = cu.Stream.from_handle(cs)
    s = cu.Stream(non_blocking=True)
    with cs:
        a = cupy.zeros((64, 64), dtype=cupy.float32)
        k["slow_fill"].launch(producer, 64 * 64, 1, a, 5.0, 64 * 64, 20_000_000)
        only = _OnlyCAI(a.T[:, ::2])  # CAI names cs as its stream
    assert only.__cuda_array_interface__["stream"] == cs.ptr
    v = cu.StridedView(only, stream=s)  # s waits for cs (cuEventRecord, cuStreamWaitEvent)
    got = _gather(k, v, stream=s)
    np.testing.assert_array_equal(got, np.full((64, 32), 5, np.float32))
    cs.synchronize()


@pytest.mark.gpu
def test_zero_size_views(ctx: cu.Context, k: dict) -> None:
    torch = import_or_skip("torch")
    t = torch.empty((0, 3), device="cuda")
    v = cu.StridedView(t)
    assert (v.size, v.nbytes, v.is_device) == (0, 0, True)
    assert v.copy_to().shape == (0, 3)
    v.copy_from(np.empty((0, 3), np.float32))
    assert pack_arg(8, v) == struct.pack("<Q", v.ptr)


@pytest.mark.gpu
def test_readonly_views(ctx: cu.Context) -> None:
    cupy = import_or_skip("cupy")
    x = cupy.arange(16, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    cai = dict(x.__cuda_array_interface__)
    cai["data"] = (cai["data"][0], True)
    v = cu.StridedView(CAI(**cai))
    assert v.readonly
    np.testing.assert_array_equal(v.copy_to(), np.arange(16, dtype=np.float32))
    with pytest.raises(ValueError, match="read-only"):
        v.copy_from(np.zeros(16, np.float32))
    buf = cu.DeviceBuffer.from_array(np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="read-only"):
        buf.copy_to(v)


@pytest.mark.gpu
def test_negative_strides(ctx: cu.Context, k: dict) -> None:
    cupy = import_or_skip("cupy")
    x = cupy.arange(48, dtype=cupy.float32).reshape(6, 8)[::-1, ::-2]
    cupy.cuda.Device().synchronize()
    v = cu.StridedView(x)
    assert v.strides == (-8, -2)
    np.testing.assert_array_equal(_gather(k, v), A[::-1, ::-2])  # ptr is element [0, 0]
    with pytest.raises(ValueError, match="negative stride"):
        v.copy_to()


@pytest.mark.gpu
def test_host_strided_copies(ctx: cu.Context) -> None:
    src = cu.StridedView(A[::2, 1:])  # pageable host memory, cuMemcpy2DAsync
    buf = cu.DeviceBuffer.empty((3, 7), np.float32)
    buf.copy_from(src)
    np.testing.assert_array_equal(buf.copy_to(), A[::2, 1:])
    host = np.zeros((6, 8), np.float32)
    cu.StridedView(host[::2, 1:]).copy_from(buf)
    expected = np.zeros((6, 8), np.float32)
    expected[::2, 1:] = A[::2, 1:]
    np.testing.assert_array_equal(host, expected)
    np.testing.assert_array_equal(src.copy_to(), A[::2, 1:])  # host to host
    dev = cu.StridedView(buf)  # a cudriver buffer through DLPack: C order
    assert (dev.shape, dev.is_c_contiguous, dev.ptr) == ((3, 7), True, buf.ptr)
    out = np.zeros((3, 8), np.float32)
    dev.copy_to(cu.StridedView(out[:, 1:]), stream=cu.Stream.legacy())
    cu.Stream.legacy().synchronize()
    np.testing.assert_array_equal(out[:, 1:], A[::2, 1:])
