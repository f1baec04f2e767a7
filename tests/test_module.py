"""Modules, kernels, argument packing and launches.

Packing is tested without a GPU (it is a pure function of the parameter sizes and the
arguments); loading and launching need one.
"""

from __future__ import annotations

import ctypes
import gc
import math
import struct
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver.module import (
    FunctionAttribute,
    Kernel,
    LaunchPlan,
    Module,
    PackedArgs,
    ParamInfo,
    _dims,
    pack_arg,
    param_layout,
)

try:
    from hypothesis import given
    from hypothesis import strategies as st
except ImportError:  # the property tests are extra; the rest runs without hypothesis
    given = None  # type: ignore[assignment]


# -- helpers that need no GPU ---------------------------------------------------------


class FakeBuffer:
    """Anything with an int ``ptr`` (like cudriver.memory.DeviceBuffer)."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class FakeArray:
    """Anything exposing ``__cuda_array_interface__`` (CuPy, PyTorch, Numba)."""

    def __init__(self, ptr: int | None) -> None:
        self.__cuda_array_interface__ = {
            "shape": (4,),
            "typestr": "<f4",
            "data": (ptr, False),
            "version": 3,
        }


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_double)]


# -- pack_arg: each accepted type ------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "value", "expected"),
    [
        (4, 7, struct.pack("<i", 7)),
        (4, -1, struct.pack("<i", -1)),
        (8, 7, struct.pack("<q", 7)),
        (8, -(2**63), struct.pack("<q", -(2**63))),
        (1, -5, struct.pack("<b", -5)),
        (2, 300, struct.pack("<h", 300)),
        (4, 1.5, struct.pack("<f", 1.5)),
        (8, 1.5, struct.pack("<d", 1.5)),
        (2, 0.5, struct.pack("<e", 0.5)),
        (1, True, b"\x01"),
        (4, True, struct.pack("<I", 1)),
        (8, False, bytes(8)),
    ],
)
def test_pack_python_numbers(size: int, value: Any, expected: bytes) -> None:
    assert pack_arg(size, value) == expected


def test_pack_float_rounds_to_float32_for_4_byte_params() -> None:
    assert pack_arg(4, 0.1) == np.float32(0.1).tobytes()
    assert pack_arg(8, 0.1) == np.float64(0.1).tobytes()
    assert pack_arg(4, math.inf) == np.float32(np.inf).tobytes()


def test_pack_int_subclass_and_float_subclass() -> None:
    assert pack_arg(4, FunctionAttribute.NUM_REGS) == struct.pack("<i", 4)

    class MyFloat(float):
        pass

    assert pack_arg(8, MyFloat(2.0)) == struct.pack("<d", 2.0)


@pytest.mark.parametrize(
    "value",
    [
        np.float32(2.5),
        np.float64(2.5),
        np.int32(-3),
        np.uint32(4_000_000_000),
        np.int64(-(2**40)),
        np.uint8(200),
        np.int16(-2),
        np.float16(1.0),
        np.bool_(True),
    ],
)
def test_pack_numpy_scalars_keep_their_dtype(value: np.generic) -> None:
    assert pack_arg(value.dtype.itemsize, value) == value.tobytes()


def test_pack_numpy_structured_scalar() -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f4")])
    v = np.zeros((), dtype=dt)[()]
    assert pack_arg(8, v) == bytes(8)


def test_pack_ctypes_values() -> None:
    assert pack_arg(4, ctypes.c_int32(-9)) == struct.pack("<i", -9)
    assert pack_arg(8, ctypes.c_double(3.25)) == struct.pack("<d", 3.25)
    assert pack_arg(2, ctypes.c_uint16(65535)) == b"\xff\xff"
    assert pack_arg(8, ctypes.c_void_p(0x1234)) == struct.pack("<Q", 0x1234)
    arr = (ctypes.c_float * 3)(1.0, 2.0, 3.0)
    assert pack_arg(12, arr) == struct.pack("<3f", 1.0, 2.0, 3.0)


def test_pack_ctypes_structure_by_value() -> None:
    p = Pair(5, 2.5)
    assert ctypes.sizeof(p) == 16
    data = pack_arg(16, p)
    assert struct.unpack_from("<i", data, 0) == (5,)
    assert struct.unpack_from("<d", data, 8) == (2.5,)


@pytest.mark.parametrize(
    ("value", "ptr"),
    [
        (drv.CUdeviceptr(0x7F0000001000), 0x7F0000001000),
        (FakeBuffer(0x7F0000002000), 0x7F0000002000),
        (FakeBuffer(drv.CUdeviceptr(0x10)), 0x10),  # type: ignore[arg-type]
        (FakeArray(0x7F0000003000), 0x7F0000003000),
        (FakeArray(None), 0),
        (None, 0),
    ],
)
def test_pack_device_pointers(value: Any, ptr: int) -> None:
    assert pack_arg(8, value) == struct.pack("<Q", ptr)


def test_cuda_array_interface_wins_over_ptr() -> None:
    class Both(FakeArray):
        ptr = 1

    assert pack_arg(8, Both(0x5000)) == struct.pack("<Q", 0x5000)


# -- pack_arg: each error message ------------------------------------------------------


def _err(size: int, value: Any, index: int = 3, kernel: str = "axpy") -> str:
    with pytest.raises(TypeError) as ei:
        pack_arg(size, value, index, kernel)
    msg = str(ei.value)
    assert msg.startswith(f"kernel {kernel!r} argument {index}: "), msg
    return msg


def test_int_out_of_range_is_a_type_error_naming_the_range() -> None:
    msg = _err(4, 2**31)
    assert "int32" in msg and "np.uint32" in msg
    _err(4, -(2**31) - 1)
    _err(8, 2**63)
    _err(1, 128)
    assert pack_arg(4, 2**31 - 1) == struct.pack("<i", 2**31 - 1)


def test_int_into_odd_size() -> None:
    assert "3-byte parameter" in _err(3, 1)


def test_float_errors() -> None:
    assert "float32 range" in _err(4, 1e300)
    assert "2, 4 or 8 bytes" in _err(16, 1.0)


def test_bool_into_odd_size() -> None:
    assert "bool" in _err(3, True)


def test_numpy_scalar_size_mismatch() -> None:
    msg = _err(4, np.float64(1.0))
    assert "float64" in msg and "8 bytes" in msg and "has 4" in msg
    _err(8, np.int32(1))


def test_pointer_into_non_pointer_param() -> None:
    msg = _err(4, FakeBuffer(0x1000))
    assert "device pointer" in msg and "4 bytes" in msg
    _err(4, drv.CUdeviceptr(1))
    _err(4, None)
    _err(4, FakeArray(0x1000))


def test_bad_pointers() -> None:
    assert "integer device address" in _err(8, FakeBuffer("x"))  # type: ignore[arg-type]
    assert "64-bit" in _err(8, FakeBuffer(-1))
    assert "'data'" in _err(8, type("Bad", (), {"__cuda_array_interface__": {}})())


def test_ctypes_size_mismatch() -> None:
    msg = _err(8, Pair(1, 2.0))
    assert "Pair" in msg and "16 bytes" in msg
    _err(8, ctypes.c_int32(1))


def test_host_array_is_refused_with_a_hint() -> None:
    msg = _err(8, np.zeros(4, np.float32))
    assert "host numpy array" in msg and "device memory" in msg


@pytest.mark.parametrize("value", ["text", [1, 2], {"a": 1}, object(), b"raw", 1j])
def test_unpackable_values(value: Any) -> None:
    msg = _err(8, value)
    assert type(value).__name__ in msg


# -- layout and PackedArgs ------------------------------------------------------------


def test_param_layout_aligns_each_parameter() -> None:
    # float a, float* x, char c, short s, double d, 16-byte struct, int n
    offsets, total = param_layout([4, 8, 1, 2, 8, 16, 4])
    assert offsets == (0, 8, 16, 18, 24, 32, 48)
    assert total == 52
    assert param_layout([]) == ((), 0)
    assert param_layout([3, 3]) == ((0, 4), 7)


@pytest.mark.parametrize("sizes", [[0], [-4], [4, 1.5], [True]])
def test_param_layout_rejects_bad_sizes(sizes: list[Any]) -> None:
    with pytest.raises(ValueError, match="positive ints"):
        param_layout(sizes)


def _read_params(p: PackedArgs) -> list[bytes]:
    """What the driver reads: ``sizes[i]`` bytes at ``((void**)address)[i]``."""
    if len(p) == 0:
        assert p.address == 0
        return []
    arr = (ctypes.c_void_p * len(p)).from_address(p.address)
    return [ctypes.string_at(arr[i], p.sizes[i]) for i in range(len(p))]


def test_packed_args_void_pointer_array() -> None:
    x, y = FakeBuffer(0x7000_0000_1000), FakeArray(0x7000_0000_2000)
    p = PackedArgs((4, 8, 8, 4), (2.0, x, y, 10), "axpy")
    assert _read_params(p) == [
        struct.pack("<f", 2.0),
        struct.pack("<Q", 0x7000_0000_1000),
        struct.pack("<Q", 0x7000_0000_2000),
        struct.pack("<i", 10),
    ]
    assert p.args == (2.0, x, y, 10)
    assert p.kernel == "axpy"
    assert p.offsets == (0, 8, 16, 24)
    assert p.arg_bytes(3) == struct.pack("<i", 10)
    assert "axpy" in repr(p)


def test_packed_args_without_parameters() -> None:
    p = PackedArgs((), ())
    assert p.address == 0
    assert len(p) == 0


@pytest.mark.parametrize(("n_args", "word"), [(2, "2 given"), (4, "4 given"), (0, "0 given")])
def test_wrong_argument_count(n_args: int, word: str) -> None:
    with pytest.raises(TypeError, match=rf"kernel 'axpy' takes 3 arguments, {word}"):
        PackedArgs((4, 8, 4), (1,) * n_args, "axpy")
    with pytest.raises(TypeError, match="takes 1 argument, 2 given"):
        PackedArgs((4,), (1, 2), "k")


def test_packed_args_error_names_index() -> None:
    with pytest.raises(TypeError, match=r"kernel 'axpy' argument 1: cannot pass a str"):
        PackedArgs((4, 8, 4), (1.0, "x", 3), "axpy")


def test_set_repacks_in_place() -> None:
    p = PackedArgs((4, 8, 4), (1.0, None, 3), "k")
    addr = p.address
    ptrs_before = list((ctypes.c_void_p * 3).from_address(addr))
    p.set(0, 5.0)
    p.set(-1, np.int32(-7))
    assert p.address == addr
    assert list((ctypes.c_void_p * 3).from_address(addr)) == ptrs_before
    assert _read_params(p) == [struct.pack("<f", 5.0), bytes(8), struct.pack("<i", -7)]
    assert p.args[0] == 5.0 and p.args[2] == np.int32(-7)
    with pytest.raises(TypeError, match="argument 2"):
        p.set(2, "no")
    assert _read_params(p)[2] == struct.pack("<i", -7)  # unchanged after a failed set
    with pytest.raises(IndexError, match="no argument 3"):
        p.set(3, 1)
    with pytest.raises(TypeError, match="index must be an int"):
        p.set(1.0, 1)  # type: ignore[arg-type]


if given is not None:

    @given(
        st.lists(
            st.sampled_from([1, 2, 4, 8, 12, 16, 3, 24]),
            min_size=0,
            max_size=20,
        )
    )
    def test_layout_is_aligned_and_disjoint(sizes: list[int]) -> None:
        offsets, total = param_layout(sizes)
        end = 0
        for s, o in zip(sizes, offsets, strict=True):
            assert o >= end
            assert o % min(8, 1 << (s - 1).bit_length()) == 0
            end = o + s
        assert total == end

    @given(st.sampled_from([1, 2, 4, 8]), st.data())
    def test_ints_round_trip(size: int, data: st.DataObject) -> None:
        bits = 8 * size
        v = data.draw(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1))
        assert int.from_bytes(pack_arg(size, v), "little", signed=True) == v
        too_big = st.integers(min_value=1 << (bits - 1))
        too_small = st.integers(max_value=-(1 << (bits - 1)) - 1)
        bad = data.draw(st.one_of(too_big, too_small))
        with pytest.raises(TypeError, match=f"int{bits}"):
            pack_arg(size, bad)

    @given(st.floats(allow_nan=False))
    def test_floats_round_trip(v: float) -> None:
        assert struct.unpack("<d", pack_arg(8, v))[0] == v
        if abs(v) <= float(np.finfo(np.float32).max):
            assert pack_arg(4, v) == np.float32(v).tobytes()

    @given(st.lists(st.tuples(st.sampled_from([4, 8]), st.integers(-1000, 1000)), max_size=12))
    def test_packed_args_match_pack_arg(items: list[tuple[int, int]]) -> None:
        sizes = [s for s, _ in items]
        args = [v for _, v in items]
        p = PackedArgs(sizes, args)
        assert _read_params(p) == [pack_arg(s, v) for s, v in items]


# -- grid, block and other validation without a GPU -----------------------------------


@pytest.mark.parametrize(
    ("value", "dims"),
    [
        (5, (5, 1, 1)),
        ((5,), (5, 1, 1)),
        ((5, 6), (5, 6, 1)),
        ([5, 6, 7], (5, 6, 7)),
        (np.int64(3), (3, 1, 1)),
        ((np.uint32(2), 3), (2, 3, 1)),
        (2**32 - 1, (2**32 - 1, 1, 1)),
    ],
)
def test_dims(value: Any, dims: tuple[int, int, int]) -> None:
    assert _dims(value, "grid") == dims


@pytest.mark.parametrize("value", [0, -1, (1, 0), (1, 1, -2), 2**32, (), (1, 2, 3, 4)])
def test_dims_value_errors(value: Any) -> None:
    with pytest.raises(ValueError, match="block"):
        _dims(value, "block")


@pytest.mark.parametrize("value", [1.0, "4", (1, 2.0), True, (True,), None])
def test_dims_type_errors(value: Any) -> None:
    with pytest.raises(TypeError, match="grid must be an int or a tuple of 1 to 3 ints"):
        _dims(value, "grid")


def test_function_attribute_matches_the_driver_enum() -> None:
    assert FunctionAttribute.__module__ == "cudriver"
    for member in FunctionAttribute:
        drv_member = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{member.name}", None)
        if drv_member is not None:  # older bindings may lack the newest ones
            assert int(drv_member) == member.value, member.name


def test_param_info_is_a_named_tuple() -> None:
    p = ParamInfo(8, 4)
    assert (p.offset, p.size) == (8, 4)
    assert p == (8, 4)


def test_classes_cannot_be_built_directly() -> None:
    with pytest.raises(TypeError, match=r"Module\.load"):
        Module()
    with pytest.raises(TypeError, match=r"Module\.kernel"):
        Kernel()
    with pytest.raises(TypeError, match=r"Kernel\.prepare"):
        LaunchPlan()


def test_load_rejects_bad_input_before_the_driver(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="Module.load takes"):
        Module.load(123)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        Module.load(tmp_path / "missing.cubin")
    with pytest.raises(FileNotFoundError):
        Module.load(str(tmp_path / "missing.ptx"))
    with pytest.raises(cu.InvalidImageError, match="empty image"):
        Module.load(b"")
    empty = tmp_path / "empty.ptx"
    empty.write_bytes(b"\n\n")
    with pytest.raises(cu.InvalidImageError, match="empty image in"):
        Module.load(empty)


# -- GPU tests --------------------------------------------------------------------------

# Hand-written PTX (no NVRTC needed): *out = v.
SET_VALUE_PTX = """
.version 8.0
.target sm_75
.address_size 64

.visible .entry set_value(
    .param .u64 set_value_param_0,
    .param .u32 set_value_param_1
)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [set_value_param_0];
    ld.param.u32 %r1, [set_value_param_1];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""

SOURCE = r"""
struct Pair { int a; double b; };

extern "C" {
__device__ int magic = 42;

__global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void mixed(char c, short s, bool flag, long long big, double d, float f,
                      unsigned int u, Pair p, double* out) {
    out[0] = c; out[1] = s; out[2] = flag ? 1.0 : 0.0; out[3] = (double)big;
    out[4] = d; out[5] = f; out[6] = u; out[7] = p.a; out[8] = p.b;
}

__global__ void reverse(int* d, int n) {
    extern __shared__ int s[];
    int t = threadIdx.x;
    s[t] = d[t];
    __syncthreads();
    d[t] = s[n - t - 1];
}

__global__ void tiled(float* out) {
    __shared__ float tile[256];
    tile[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = tile[255 - threadIdx.x];
}

__global__ void nothing() {}
}
"""


def _check(r: tuple[Any, ...]) -> Any:
    assert r[0] == drv.CUresult.CUDA_SUCCESS, r[0]
    return r[1] if len(r) == 2 else r[1:]


class RawBuffer:
    """Raw device memory (cuMemAlloc), exposing ``ptr`` like a DeviceBuffer."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.ptr = int(_check(drv.cuMemAlloc(nbytes)))

    @classmethod
    def from_array(cls, a: np.ndarray) -> RawBuffer:
        b = cls(a.nbytes)
        _check(drv.cuMemcpyHtoD(b.ptr, a.ctypes.data, a.nbytes))
        return b

    def to(self, dtype: Any, n: int) -> np.ndarray:
        out = np.empty(n, dtype)
        _check(drv.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes))
        return out

    def free(self) -> None:
        if self.ptr:
            _check(drv.cuMemFree(self.ptr))
            self.ptr = 0


class RawArray(RawBuffer):
    """The same memory seen through ``__cuda_array_interface__`` (float32)."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": (self.nbytes // 4,),
            "typestr": "<f4",
            "data": (self.ptr, False),
            "version": 3,
        }


@pytest.fixture
def buffers(ctx: cu.Context) -> Iterator[list[RawBuffer]]:
    made: list[RawBuffer] = []
    yield made
    _check(drv.cuCtxSynchronize())
    for b in made:
        b.free()


def _nvrtc_missing_reason() -> str | None:
    from cudriver.program import NvrtcNotFoundError, nvrtc_version

    try:
        nvrtc_version()
    except NvrtcNotFoundError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def cubin(device: cu.Device) -> bytes:
    reason = _nvrtc_missing_reason()
    if reason is not None:
        pytest.skip(f"NVRTC is not installed: {reason}")
    from cudriver.program import compile

    return compile(SOURCE, arch=device.compute_capability, target="cubin")


@pytest.fixture
def module(ctx: cu.Context, cubin: bytes) -> Iterator[Module]:
    m = Module.load(cubin, context=ctx)
    yield m
    m.close()


@pytest.fixture
def ptx_module(ctx: cu.Context) -> Iterator[Module]:
    m = Module.load(SET_VALUE_PTX)
    yield m
    m.close()


@pytest.mark.gpu
def test_load_ptx_text_bytes_and_path(
    ctx: cu.Context, stream: cu.Stream, buffers: list[RawBuffer], tmp_path: Path
) -> None:
    path = tmp_path / "set_value.ptx"
    path.write_text(SET_VALUE_PTX)
    out = RawBuffer(4)
    buffers.append(out)
    for i, image in enumerate(
        [SET_VALUE_PTX, SET_VALUE_PTX.encode(), path, str(path), bytearray(path.read_bytes())]
    ):
        with Module.load(image) as m:
            assert m.context == ctx
            k = m.kernel("set_value")
            assert k.param_info == (ParamInfo(0, 8), ParamInfo(8, 4))
            assert k.num_params == 2
            assert k.param_sizes == (8, 4)
            k.launch(stream, 1, 1, out, 100 + i)
            stream.synchronize()
            assert out.to(np.int32, 1)[0] == 100 + i
        assert m.closed and k.closed


@pytest.mark.gpu
def test_kernel_identity_and_cache(ptx_module: Module) -> None:
    k = ptx_module.kernel("set_value")
    assert ptx_module.kernel("set_value") is k
    assert k.name == "set_value"
    assert k.module is ptx_module
    assert isinstance(k.handle, drv.CUfunction)
    assert "set_value" in repr(k)
    assert "PTX" in repr(ptx_module)
    k2 = Kernel.from_handle(k.handle, owner=ptx_module)
    assert k2.name == "set_value"
    assert k2 == k and hash(k2) == hash(k)
    assert not k2.owned
    m2 = Module.from_handle(ptx_module.handle)
    assert m2 == ptx_module and not m2.owned
    m2.close()
    assert not ptx_module.closed


@pytest.mark.gpu
def test_missing_kernel_names_it(ptx_module: Module) -> None:
    with pytest.raises(cu.NotFoundError, match="no kernel named 'nope'") as ei:
        ptx_module.kernel("nope")
    assert isinstance(ei.value, LookupError)
    with pytest.raises(TypeError):
        ptx_module.kernel(b"set_value")  # type: ignore[arg-type]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "image",
    [
        b"this is not PTX\n.entry broken(\n",
        b"\x7fELF" + bytes(60) + b"garbage",
    ],
)
def test_bad_image(ctx: cu.Context, image: bytes) -> None:
    with pytest.raises(cu.InvalidImageError, match="cuModuleLoadData") as ei:
        Module.load(image)
    assert isinstance(ei.value, ValueError)


@pytest.mark.gpu
def test_axpy_launch(module: Module, stream: cu.Stream, buffers: list[RawBuffer]) -> None:
    n = 1000
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = RawArray.from_array(x), RawBuffer.from_array(y)
    buffers += [dx, dy]
    k = module.kernel("axpy")
    assert k.param_info == ((0, 4), (8, 8), (16, 8), (24, 4))
    k.launch(stream, (n + 255) // 256, 256, 2.5, dx, dy, n)
    stream.synchronize()
    # The device fuses a * x + y into one FMA (one rounding): compare with the exact
    # result in float64, not numpy's float32 multiply-then-add (two roundings).
    exact = 2.5 * x.astype(np.float64) + y
    got = dy.to(np.float32, n)
    np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-6)
    # numpy scalars and a raw CUdeviceptr work too
    dy_ptr = drv.CUdeviceptr(dy.ptr)
    k.launch(stream, (n + 127) // 128, (128, 1, 1), np.float32(-1.0), dx, dy_ptr, np.int32(n))
    stream.synchronize()
    exact = got.astype(np.float64) - x
    np.testing.assert_allclose(dy.to(np.float32, n), exact, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_axpy_ptx_target(
    ctx: cu.Context, device: cu.Device, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    if (reason := _nvrtc_missing_reason()) is not None:
        pytest.skip(f"NVRTC is not installed: {reason}")
    from cudriver.program import compile

    ptx = compile(SOURCE)  # default arch: the current device's
    assert b".entry axpy" in ptx
    cc = device.compute_capability
    assert f".target sm_{cc.major}{cc.minor}".encode() in ptx
    err: cu.InvalidImageError | None = None
    try:
        m = Module.load(ptx)
    except cu.InvalidImageError as exc:
        err = exc
    if err is not None:
        # NVRTC newer than the driver: the message must say what to do.
        assert err.code == drv.CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, err
        assert "target='cubin'" in str(err)
        return
    with m:
        x = np.arange(64, dtype=np.float32)
        dx, dy = RawBuffer.from_array(x), RawBuffer.from_array(np.ones(64, np.float32))
        buffers += [dx, dy]
        m.kernel("axpy").launch(stream, 1, 64, 3.0, dx, dy, 64)
        stream.synchronize()
        np.testing.assert_array_equal(dy.to(np.float32, 64), 3 * x + 1)


@pytest.mark.gpu
def test_prepare_and_set_arg(module: Module, stream: cu.Stream, buffers: list[RawBuffer]) -> None:
    n = 4096
    x = np.linspace(0, 1, n, dtype=np.float32)
    dx, dy = RawBuffer.from_array(x), RawBuffer.from_array(np.zeros(n, np.float32))
    buffers += [dx, dy]
    k = module.kernel("axpy")
    plan = k.prepare((n // 256,), (256,), 1.0, dx, dy, n)
    assert isinstance(plan, LaunchPlan)
    assert plan.kernel is k
    assert plan.grid == (16, 1, 1) and plan.block == (256, 1, 1) and plan.shared_mem == 0
    assert plan.args == (1.0, dx, dy, n)
    for _ in range(5):
        plan.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(dy.to(np.float32, n), 5 * x, rtol=1e-6)
    plan.set_arg(0, -2.0)
    assert plan.args[0] == -2.0
    plan.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(dy.to(np.float32, n), 3 * x, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="kernel 'axpy' argument 3"):
        plan.set_arg(3, 2**40)
    assert "axpy" in repr(plan)


@pytest.mark.gpu
def test_plan_keeps_kernel_and_args_alive(
    ctx: cu.Context, cubin: bytes, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    x = RawBuffer.from_array(np.ones(8, np.float32))
    out = RawBuffer.from_array(np.zeros(8, np.float32))
    buffers += [x, out]
    m = Module.load(cubin)
    mref = weakref.ref(m)
    plan = m.kernel("axpy").prepare(1, 8, 1.0, FakeBuffer(x.ptr), out, 8)
    del m
    gc.collect()
    assert mref() is not None  # the plan -> kernel -> module chain holds it
    plan.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(out.to(np.float32, 8), 1)
    k = plan.kernel
    del plan
    gc.collect()
    assert mref() is not None
    del k
    gc.collect()
    assert mref() is None  # unloaded once nothing refers to it


@pytest.mark.gpu
def test_mixed_parameter_types(module: Module, stream: cu.Stream, buffers: list[RawBuffer]) -> None:
    out = RawBuffer(9 * 8)
    buffers.append(out)
    k = module.kernel("mixed")
    assert k.param_sizes == (1, 2, 1, 8, 8, 4, 4, 16, 8)
    big, u = -(2**40), np.uint32(4_000_000_000)
    k.launch(stream, 1, 1, np.int8(-3), -300, True, big, 0.1, 0.1, u, Pair(7, 2.25), out)
    stream.synchronize()
    got = out.to(np.float64, 9)
    expected = [-3, -300, 1, -(2**40), 0.1, float(np.float32(0.1)), 4e9, 7, 2.25]
    np.testing.assert_array_equal(got, np.array(expected, dtype=np.float64))


@pytest.mark.gpu
def test_dynamic_shared_memory(module: Module, stream: cu.Stream, buffers: list[RawBuffer]) -> None:
    n = 128
    d = RawBuffer.from_array(np.arange(n, dtype=np.int32))
    buffers.append(d)
    k = module.kernel("reverse")
    k.launch(stream, 1, n, d, n, shared_mem=n * 4)
    stream.synchronize()
    np.testing.assert_array_equal(d.to(np.int32, n), np.arange(n)[::-1])
    k.prepare(1, n, d, n, shared_mem=n * 4).launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(d.to(np.int32, n), np.arange(n))
    with pytest.raises(ValueError, match="shared_mem"):
        k.launch(stream, 1, n, d, n, shared_mem=-1)
    with pytest.raises(TypeError, match="shared_mem"):
        k.prepare(1, n, d, n, shared_mem=1.5)  # type: ignore[arg-type]


@pytest.mark.gpu
def test_kernel_attributes(module: Module, device: cu.Device) -> None:
    axpy = module.kernel("axpy")
    assert 0 < axpy.max_threads_per_block <= 1024
    assert axpy.num_registers > 0
    assert axpy.num_registers == axpy.attribute(FunctionAttribute.NUM_REGS)
    assert axpy.attribute(drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS) > 0
    assert axpy.attribute(4) == axpy.num_registers
    assert axpy.shared_size_bytes == 0
    assert axpy.local_size_bytes == 0
    assert axpy.const_size_bytes >= 0
    cc = device.compute_capability
    assert axpy.binary_version == cc.major * 10 + cc.minor
    assert axpy.ptx_version > 0
    tiled = module.kernel("tiled")
    assert tiled.shared_size_bytes == 256 * 4
    rev = module.kernel("reverse")
    before = rev.max_dynamic_shared_size_bytes
    assert before > 0
    rev.max_dynamic_shared_size_bytes = 1024
    assert rev.max_dynamic_shared_size_bytes == 1024
    rev.set_attribute(FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, before)
    assert rev.max_dynamic_shared_size_bytes == before
    with pytest.raises(cu.InvalidValueError, match="cuFuncSetAttribute"):
        rev.max_dynamic_shared_size_bytes = 1 << 30
    with pytest.raises(TypeError):
        rev.attribute("NUM_REGS")  # type: ignore[arg-type]
    nothing = module.kernel("nothing")
    assert nothing.num_params == 0 and nothing.param_info == ()


@pytest.mark.gpu
def test_kernel_without_parameters(module: Module, stream: cu.Stream) -> None:
    k = module.kernel("nothing")
    k.launch(stream, (2, 2, 2), (4, 4))
    k.prepare(1, 1).launch(stream)
    stream.synchronize()
    with pytest.raises(TypeError, match="takes 0 arguments, 1 given"):
        k.launch(stream, 1, 1, 5)


@pytest.mark.gpu
def test_get_global(module: Module) -> None:
    ptr, size = module.get_global("magic")
    assert size == 4
    out = np.zeros(1, np.int32)
    _check(drv.cuMemcpyDtoH(out.ctypes.data, ptr, 4))
    assert out[0] == 42
    with pytest.raises(cu.NotFoundError, match="no global named 'missing'"):
        module.get_global("missing")


@pytest.mark.gpu
def test_wrong_arguments_raise_before_launching(
    module: Module, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    y = RawBuffer.from_array(np.ones(4, np.float32))
    buffers.append(y)
    k = module.kernel("axpy")
    with pytest.raises(TypeError, match=r"kernel 'axpy' takes 4 arguments, 3 given"):
        k.launch(stream, 1, 4, 1.0, y, y)
    with pytest.raises(TypeError, match=r"kernel 'axpy' takes 4 arguments, 5 given"):
        k.prepare(1, 4, 1.0, y, y, 4, 5)
    with pytest.raises(TypeError, match=r"kernel 'axpy' argument 1: cannot pass a str"):
        k.launch(stream, 1, 4, 1.0, "x", y, 4)
    with pytest.raises(TypeError, match=r"kernel 'axpy' argument 1: a host numpy array"):
        k.launch(stream, 1, 4, 1.0, np.ones(4, np.float32), y, 4)
    with pytest.raises(TypeError, match=r"kernel 'axpy' argument 3: the int 4294967296"):
        k.launch(stream, 1, 4, 1.0, y, y, 2**32)
    with pytest.raises(TypeError, match=r"argument 0: the numpy float64 scalar"):
        k.launch(stream, 1, 4, np.float64(1.0), y, y, 4)
    with pytest.raises(ValueError, match="grid"):
        k.launch(stream, 0, 4, 1.0, y, y, 4)
    with pytest.raises(ValueError, match="block"):
        k.prepare(1, (4, 1, 1, 1), 1.0, y, y, 4)
    stream.synchronize()
    np.testing.assert_array_equal(y.to(np.float32, 4), 1)  # nothing ran


@pytest.mark.gpu
def test_block_too_large_says_why(
    module: Module, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    y = RawBuffer(4)
    buffers.append(y)
    k = module.kernel("axpy")
    with pytest.raises(cu.CudaError, match="max_threads_per_block") as ei:
        k.launch(stream, 1, (32, 32, 2), 1.0, y, y, 0)
    assert ei.value.func == "cuLaunchKernel"
    assert "axpy" in str(ei.value)


@pytest.mark.gpu
def test_closed_stream(ptx_module: Module, ctx: cu.Context, buffers: list[RawBuffer]) -> None:
    out = RawBuffer(4)
    buffers.append(out)
    k = ptx_module.kernel("set_value")
    plan = k.prepare(1, 1, out, 1)
    s = cu.Stream(context=ctx)
    s.close()
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        k.launch(s, 1, 1, out, 1)
    with pytest.raises(cu.ClosedError, match="Stream is closed"):
        plan.launch(s)


@pytest.mark.gpu
def test_closed_module(ctx: cu.Context, stream: cu.Stream, buffers: list[RawBuffer]) -> None:
    out = RawBuffer(4)
    buffers.append(out)
    m = Module.load(SET_VALUE_PTX)
    k = m.kernel("set_value")
    plan = k.prepare(1, 1, out, 1)
    m.close()
    m.close()  # idempotent
    assert m.closed and k.closed
    with pytest.raises(cu.ClosedError, match=r"Kernel 'set_value' is closed \(its Module"):
        k.launch(stream, 1, 1, out, 1)
    with pytest.raises(cu.ClosedError, match="Kernel 'set_value' is closed"):
        plan.launch(stream)
    with pytest.raises(cu.ClosedError, match="Kernel 'set_value' is closed"):
        k.prepare(1, 1, out, 1)
    with pytest.raises(cu.ClosedError, match="Kernel"):
        _ = k.max_threads_per_block
    with pytest.raises(cu.ClosedError, match="Module is closed"):
        m.kernel("set_value")
    assert "closed" in repr(k) and "closed" in repr(m)


@pytest.mark.gpu
def test_capture_keeps_arguments_alive(
    module: Module, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    y = RawBuffer.from_array(np.zeros(32, np.float32))
    x = RawBuffer.from_array(np.ones(32, np.float32))
    buffers += [x, y]
    k = module.kernel("axpy")
    plan = k.prepare(1, 32, 1.0, FakeBuffer(x.ptr), y, 32)
    marker = FakeBuffer(x.ptr)
    mref = weakref.ref(marker)
    with stream.capture() as g:
        plan.launch(stream)
        k.launch(stream, 1, 32, 2.0, marker, y, 32)
    del marker
    gc.collect()
    assert mref() is not None  # the graph holds what the captured launch refers to
    exe = g.instantiate()
    for _ in range(2):
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.to(np.float32, 32), 6)
    exe.close()
    g.close()
    del exe, g
    gc.collect()
    assert mref() is None


# -- the fast packers agree with pack_arg ------------------------------------------------
from hypothesis import given as _given  # noqa: E402
from hypothesis import strategies as _st  # noqa: E402

from cudriver.module import _pack_fast  # noqa: E402

_VALUES = _st.one_of(
    _st.integers(-(2**70), 2**70),
    _st.floats(allow_nan=False, width=32),
    _st.booleans(),
    _st.integers(-(2**31), 2**31 - 1).map(np.int32),
    _st.integers(0, 2**32 - 1).map(np.uint32),
    _st.floats(allow_nan=False, width=32).map(np.float32),
    _st.floats(allow_nan=False).map(np.float64),
    _st.integers(-(2**63), 2**63 - 1).map(np.int64),
)


@_given(_st.lists(_st.tuples(_st.sampled_from([1, 2, 4, 8]), _VALUES), min_size=1, max_size=6))
def test_fast_packing_matches_pack_arg(params: list[tuple[int, object]]) -> None:
    sizes = [s for s, _ in params]
    args = [v for _, v in params]
    offsets, total = param_layout(sizes)
    items = tuple(zip(range(len(sizes)), sizes, offsets, strict=True))
    expected = bytearray(total)
    message = None
    try:
        for i, s, o in items:
            expected[o : o + s] = pack_arg(s, args[i], i, "k")
    except TypeError as exc:
        message = str(exc)
    if message is not None:
        with pytest.raises(TypeError) as info:
            _pack_fast(bytearray(total), items, args, "k")
        assert str(info.value) == message
        return
    got = bytearray(total)
    _pack_fast(got, items, args, "k")
    assert got == expected
