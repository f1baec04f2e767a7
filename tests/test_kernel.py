"""Modules, kernels and launches: loading, attributes, launch plans.

``Module`` lives in ``cudriver._launch.module``, ``Kernel`` in ``cudriver._launch.kernel``
and ``LaunchPlan`` in ``cudriver._launch.plan``.
The checks made before any driver call run without a GPU; loading and launching need one.
How arguments are packed is tested in test_packing.py.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import FunctionAttribute, Kernel, LaunchPlan, Module, ParamInfo
from cudriver._launch.program import compile

from ._support import (
    AXPY_KERNEL,
    FakeBuffer,
    Pair,
    RawBuffer,
    needs_nvrtc,
    nvrtc_missing_reason,
    unwrap,
)

# -- without a GPU ----------------------------------------------------------------------


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


# -- with a GPU --------------------------------------------------------------------------

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

SOURCE = (
    AXPY_KERNEL
    + r"""
struct Pair { int a; double b; };

extern "C" {
__device__ int magic = 42;

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
)

# One __constant__ array of 64 floats (256 bytes), in a module of its own.
CONST_SOURCE = r"""
extern "C" {
__constant__ float coeffs[64];
__global__ void read_coeff(float* out, int i) { out[0] = coeffs[i]; }
}
"""


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
    unwrap(drv.cuCtxSynchronize())
    for b in made:
        b.close()


@pytest.fixture(scope="module")
def cubin(device: cu.Device) -> bytes:
    reason = nvrtc_missing_reason()
    if reason is not None:
        pytest.skip(f"NVRTC is not installed: {reason}")
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
@needs_nvrtc
def test_axpy_ptx_target(
    ctx: cu.Context, device: cu.Device, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
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
    other = k.prepare(1, 1, 7.0, dx, dy, 1)
    other.set_arg(0, 9.0)  # plans share no argument storage
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
    assert axpy.attribute(drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS) == axpy.num_registers
    assert axpy.attribute(4) == axpy.num_registers
    assert axpy.shared_size_bytes == 0
    assert axpy.local_size_bytes == 0
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
@needs_nvrtc
def test_const_size_bytes(
    ptx_module: Module, device: cu.Device, stream: cu.Stream, buffers: list[RawBuffer]
) -> None:
    assert ptx_module.kernel("set_value").const_size_bytes == 0  # no __constant__ at all
    image = compile(CONST_SOURCE, arch=device.compute_capability, target="cubin")
    with Module.load(image) as m:
        k = m.kernel("read_coeff")
        assert k.const_size_bytes == 64 * 4
        g = m.get_global("coeffs")
        assert g.nbytes == 64 * 4
        coeffs = np.arange(64, dtype=np.float32) / 4
        g.copy_from(coeffs)  # done on return, before `stream` reads it
        out = RawBuffer(4)
        buffers.append(out)
        k.launch(stream, 1, 1, out, 5)
        stream.synchronize()
        assert out.to(np.float32, 1)[0] == coeffs[5]


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
    g = module.get_global("magic")
    assert isinstance(g, cu.DeviceBuffer)
    assert g.nbytes == 4 and not g.owned
    assert g.context == module.context
    out = np.zeros(1, np.int32)
    unwrap(drv.cuMemcpyDtoH(out.ctypes.data, g.ptr, 4))
    assert out[0] == 42
    assert g.cast(np.int32).copy_to()[0] == 42
    g.close()  # frees nothing: the module's memory
    assert module.get_global("magic").copy_to().view(np.int32)[0] == 42
    with pytest.raises(cu.NotFoundError, match="no global named 'missing'"):
        module.get_global("missing")


@pytest.mark.gpu
def test_a_global_keeps_its_module_loaded(device: cu.Device, ctx: cu.Context) -> None:
    # The buffer holds a lease on the module: closing the module makes it unusable
    # at once but unloads it only when the buffer is gone, so the memory stays valid.
    src = '__device__ int magic = 42;\nextern "C" __global__ void touch() {}\n'
    m = Module.load(compile(src, arch=device.compute_capability))
    g = m.get_global("magic")
    m.close()
    with pytest.raises(cu.ClosedError):
        m.kernel("touch")
    assert g.copy_to().view(np.int32)[0] == 42
    del g
    gc.collect()


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
