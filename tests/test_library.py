"""Libraries: code loaded once for every device; kernels launched on any context's stream."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cuda.bindings import driver as _drv

import cudriver as cu
from cudriver._launch import library as lib_mod
from cudriver._launch.kernel import ParamInfo
from cudriver._runtime import _bindings

from ._support import gpu_unavailable_reason, needs_nvrtc

SOURCE = r"""
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__device__ int hits;

extern "C" __global__ void count(int* out) {
    atomicAdd(&hits, 1);
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 7;
}
"""
NAMES = ["axpy<float>", "axpy<double>"]
SUCCESS = _drv.CUresult.CUDA_SUCCESS
INVALID_VALUE = _drv.CUresult.CUDA_ERROR_INVALID_VALUE


# -- without a GPU: what is checked before the driver --------------------------------------
def fake_device(ordinal: int) -> cu.Device:
    dev = object.__new__(cu.Device)
    dev._ordinal = ordinal
    dev._h = _drv.CUdevice(ordinal)
    dev._name = f"fake {ordinal}"
    dev._attrs = {}
    return dev


def fake_drv(**functions: Any) -> types.SimpleNamespace:
    """The bindings' driver module with some functions replaced (or removed: None)."""
    ns = types.SimpleNamespace(**{n: getattr(_drv, n) for n in dir(_drv) if not n.startswith("__")})
    for name, fn in functions.items():
        if fn is None:
            delattr(ns, name)
        else:
            setattr(ns, name, fn)
    return ns


@pytest.fixture
def no_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call guard disarmed: the faked driver functions are called without a driver."""
    monkeypatch.setattr(lib_mod, "GUARD", types.SimpleNamespace(armed=False))
    monkeypatch.setattr(lib_mod, "driver_version", lambda: (11, 8))


def test_libraries_are_not_made_directly() -> None:
    with pytest.raises(TypeError, match=r"Library.load\(\)"):
        cu.Library()
    with pytest.raises(TypeError, match=r"Library.kernel\(name\)"):
        cu.LibraryKernel()


def test_an_empty_image_or_a_missing_file_is_refused_first(tmp_path: Path) -> None:
    with pytest.raises(cu.InvalidImageError, match="empty image"):
        cu.Library.load(b"")
    with pytest.raises(cu.InvalidImageError, match="empty image"):
        cu.Library.load("\n\n")
    with pytest.raises(FileNotFoundError):
        cu.Library.load(tmp_path / "missing.cubin")
    (tmp_path / "empty.ptx").write_bytes(b"")
    with pytest.raises(cu.InvalidImageError, match="empty image in"):
        cu.Library.load(str(tmp_path / "empty.ptx"))
    with pytest.raises(TypeError, match="Module.load takes"):
        cu.Library.load(3)  # type: ignore[arg-type]


def test_a_borrowed_library_and_kernel() -> None:
    lib = cu.Library.from_handle(0x55)
    assert not lib.owned and "foreign" in repr(lib) and dict(lib.lowered_names) == {}
    assert isinstance(lib.handle, _drv.CUlibrary) and int(lib) == 0x55
    k = cu.LibraryKernel.from_handle(_drv.CUkernel(0x1234), owner=lib, name="axpy")
    assert isinstance(k, cu.Kernel)
    assert isinstance(k.handle, _drv.CUkernel) and int(k.handle) == 0x1234
    # Launches pass the CUkernel cast to CUfunction (the driver takes either).
    assert isinstance(k._h, _drv.CUfunction) and int(k._h) == 0x1234
    assert k.module is None and k.library is None and k.name == "axpy"
    assert repr(k) == "<cudriver.LibraryKernel 'axpy' 0x1234>"
    k.close()
    assert repr(k) == "<cudriver.LibraryKernel 'axpy' closed>"
    with pytest.raises(cu.ClosedError, match="LibraryKernel 'axpy' is closed"):
        k.attribute(cu.FunctionAttribute.NUM_REGS)
    lib.close()


def test_a_library_closed_closes_its_kernels() -> None:
    lib = cu.Library.from_handle(0x55)
    k = lib_mod.LibraryKernel._of(_drv.CUkernel(0x99), "k", lib)
    lib._kernels["k"] = k
    assert k.library is lib
    lib.close()
    assert k.closed
    with pytest.raises(cu.ClosedError, match="its Library was closed"):
        k.param_info  # noqa: B018
    with pytest.raises(cu.ClosedError, match="Library is closed"):
        lib.kernel("k")


def test_bindings_without_the_call_raise_not_supported(
    monkeypatch: pytest.MonkeyPatch, no_guard: None
) -> None:
    monkeypatch.setattr(lib_mod, "_drv", fake_drv(cuLibraryLoadData=None))
    with pytest.raises(cu.NotSupportedError, match="cuda-bindings 12.0") as ei:
        cu.Library.load(b"not empty")
    assert "cuLibraryLoadData" in str(ei.value)


def test_a_driver_without_the_call_raises_not_supported(
    monkeypatch: pytest.MonkeyPatch, no_guard: None
) -> None:
    def missing(*args: Any) -> Any:
        raise RuntimeError('Function "cuLibraryLoadData" not found')

    monkeypatch.setattr(lib_mod, "_drv", fake_drv(cuLibraryLoadData=missing))
    with pytest.raises(cu.NotSupportedError, match=r"needs a CUDA 12.0 driver.*CUDA 11.8"):
        cu.Library.load(b"not empty")


def test_attributes_are_asked_per_device(monkeypatch: pytest.MonkeyPatch, no_guard: None) -> None:
    seen: list[tuple[Any, ...]] = []

    def get(attr: Any, kern: Any, dev: Any) -> Any:
        seen.append(("get", attr, int(kern), int(dev)))
        return SUCCESS, 100 + int(dev)

    def set_(attr: Any, value: int, kern: Any, dev: Any) -> Any:
        seen.append(("set", attr, value, int(kern), int(dev)))
        return (SUCCESS,)

    def cache(kern: Any, config: Any, dev: Any) -> Any:
        seen.append(("cache", config, int(kern), int(dev)))
        return (SUCCESS,)

    monkeypatch.setattr(
        lib_mod,
        "_drv",
        fake_drv(cuKernelGetAttribute=get, cuKernelSetAttribute=set_, cuKernelSetCacheConfig=cache),
    )
    k = cu.LibraryKernel.from_handle(_drv.CUkernel(0x10), name="k")
    regs = cu.FunctionAttribute.NUM_REGS
    assert k.attribute(regs, device=fake_device(1)) == 101
    assert k.attribute(regs, fake_device(3)) == 103
    k.set_attribute(cu.FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536, fake_device(2))
    prefer = _drv.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED
    k.set_cache_config(prefer, device=fake_device(1))
    num_regs = _drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
    dyn = _drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert seen == [
        ("get", num_regs, 0x10, 1),
        ("get", num_regs, 0x10, 3),
        ("set", dyn, 65536, 0x10, 2),
        ("cache", prefer, 0x10, 1),
    ]
    with pytest.raises(TypeError, match="CUfunc_cache"):
        k.set_cache_config("shared", device=fake_device(1))
    with pytest.raises(ValueError, match="does not fit a C int"):
        k.set_attribute(cu.FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 40, 0)
    with pytest.raises(TypeError, match="device must be"):
        k.attribute(regs, device="0")  # type: ignore[arg-type]


def test_param_info_from_the_kernel_else_from_the_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def kernel_params(kern: Any, i: int) -> Any:
        return (SUCCESS, [0, 8][i], 8) if i < 2 else (INVALID_VALUE, 0, 0)

    monkeypatch.setattr(lib_mod, "_drv", fake_drv(cuKernelGetParamInfo=kernel_params))
    k = cu.LibraryKernel.from_handle(_drv.CUkernel(0x10), name="k")
    assert k.param_info == (ParamInfo(0, 8), ParamInfo(8, 8))
    assert k.param_sizes == (8, 8) and k.num_params == 2

    # A driver before CUDA 12.4: the current context's function is asked.
    def missing(kern: Any, i: int) -> Any:
        raise RuntimeError('Function "cuKernelGetParamInfo" not found')

    def func_params(fn: Any, i: int) -> Any:
        assert int(fn) == 0x77
        return (SUCCESS, 0, 4) if i == 0 else (INVALID_VALUE, 0, 0)

    monkeypatch.setattr(lib_mod, "_drv", fake_drv(cuKernelGetParamInfo=missing))
    monkeypatch.setattr(_bindings, "func_get_param_info", func_params)
    monkeypatch.setattr(
        lib_mod.LibraryKernel, "function", lambda self, context=None: _drv.CUfunction(0x77)
    )
    k2 = cu.LibraryKernel.from_handle(_drv.CUkernel(0x11), name="k2")
    assert k2.param_info == (ParamInfo(0, 4),)


# -- on a GPU -----------------------------------------------------------------------------
def _code_for(devices: list[cu.Device], **kw: Any) -> cu.CompiledCode:
    """A cubin when every device has one architecture, else PTX for the oldest of them."""
    ccs = {d.compute_capability for d in devices}
    if len(ccs) == 1:
        return cu.compile(SOURCE, arch=devices[0], target="cubin", name_expressions=NAMES, **kw)
    if cu.nvrtc_version() > cu.driver_version():
        pytest.skip(
            "devices of different architectures need PTX, and NVRTC is newer than the driver"
        )
    return cu.compile(SOURCE, arch=min(ccs), target="ptx", name_expressions=NAMES, **kw)


def _axpy(k: cu.Kernel, stream: cu.Stream, a: float, n: int = 4096) -> None:
    """Launch ``k`` (axpy<float>) on ``stream`` with buffers of the stream's context; check."""
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    with stream.context:
        bx, by = cu.DeviceBuffer.from_array(x), cu.DeviceBuffer.from_array(y)
    k.launch(stream, (n + 255) // 256, 256, np.float32(a), bx, by, n)
    stream.synchronize()
    np.testing.assert_array_equal(by.copy_to().view(np.float32), np.float32(a) * x + 1)
    bx.close()
    by.close()


@pytest.fixture
def library(ctx: cu.Context) -> Iterator[cu.Library]:
    lib = cu.Library.load(_code_for([ctx.device]))
    yield lib
    lib.close()


@pytest.mark.gpu
@needs_nvrtc
def test_a_library_kernel_launches_prepares_and_answers_per_device(
    ctx: cu.Context, stream: cu.Stream, library: cu.Library
) -> None:
    k = library.kernel("axpy<float>")
    assert isinstance(k, cu.LibraryKernel) and isinstance(k, cu.Kernel)
    assert library.kernel("axpy<float>") is k
    assert library.kernel(library.lowered_names["axpy<float>"]) is k
    assert k.library is library and k.module is None
    assert isinstance(k.handle, _drv.CUkernel)
    assert k.param_sizes == (4, 8, 8, 4)
    _axpy(k, stream, 2.0)
    kd = library.kernel("axpy<double>")
    assert kd.param_sizes == (8, 8, 8, 4)

    # a prepared launch
    n = 256
    bx = cu.DeviceBuffer.from_array(np.arange(n, dtype=np.float32))
    by = cu.DeviceBuffer.from_array(np.zeros(n, dtype=np.float32))
    plan = k.prepare(1, n, np.float32(3.0), bx, by, n)
    plan.launch(stream)
    plan.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(by.copy_to().view(np.float32), 6 * np.arange(n))

    # attributes: per device, the current context's device by default
    regs = k.attribute(cu.FunctionAttribute.NUM_REGS)
    assert regs == k.num_registers == k.attribute(cu.FunctionAttribute.NUM_REGS, ctx.device)
    assert k.attribute(cu.FunctionAttribute.NUM_REGS, device=ctx.device.ordinal) == regs
    assert k.max_threads_per_block >= 256
    k.max_dynamic_shared_size_bytes = 1024
    assert k.max_dynamic_shared_size_bytes == 1024
    k.set_cache_config(_drv.CUfunc_cache.CU_FUNC_CACHE_PREFER_SHARED)

    # the context's function, for raw calls and occupancy
    fn = k.function()
    assert isinstance(fn, _drv.CUfunction) and int(fn) == int(k.function(ctx))
    num_regs = _drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
    assert int(cu.driver.cuFuncGetAttribute(num_regs, fn)) == regs
    assert k.max_active_blocks_per_sm(256) >= 1
    grid, block = k.suggested_block_size()
    assert grid >= 1 and block >= 32

    # a library's __device__ variable, in the current context
    hits = library.get_global("hits")
    assert hits.nbytes == 4
    hits.copy_from(np.zeros(1, dtype=np.int32))
    out = cu.DeviceBuffer.from_array(np.zeros(1, dtype=np.int32))
    library.kernel("count").launch(stream, 2, 64, out)
    stream.synchronize()
    assert hits.copy_to().view(np.int32)[0] == 128 and out.copy_to().view(np.int32)[0] == 7

    with pytest.raises(cu.NotFoundError, match="no kernel named 'axpy<int>'"):
        library.kernel("axpy<int>")
    for b in (bx, by, out, hits):
        b.close()
    del plan
    library.close()
    assert k.closed
    with pytest.raises(cu.ClosedError, match="Library was closed"):
        k.launch(stream, 1, 1, np.float32(1), bx, by, 1)


@pytest.mark.gpu
@needs_nvrtc
def test_a_library_kernel_in_graphs(
    ctx: cu.Context, stream: cu.Stream, library: cu.Library
) -> None:
    k = library.kernel("axpy<float>")
    n = 256
    bx = cu.DeviceBuffer.from_array(np.arange(n, dtype=np.float32))
    by = cu.DeviceBuffer.from_array(np.zeros(n, dtype=np.float32))
    with stream.capture() as g:
        k.launch(stream, 1, n, np.float32(1.0), bx, by, n)
    with g, g.instantiate() as exe:
        exe.launch(stream)
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(by.copy_to().view(np.float32), 2 * np.arange(n))
    built = cu.Graph()
    built.add_kernel(k, 1, n, np.float32(1.0), bx, by, n)  # a node of the context's function
    with built, built.instantiate() as exe:
        exe.launch(stream)
        stream.synchronize()
    np.testing.assert_array_equal(by.copy_to().view(np.float32), 3 * np.arange(n))
    bx.close()
    by.close()


@pytest.mark.gpu
@needs_nvrtc
def test_a_library_loads_from_a_file(ctx: cu.Context, stream: cu.Stream, tmp_path: Path) -> None:
    code = _code_for([ctx.device])
    path = tmp_path / ("lib.cubin" if code.target == "cubin" else "lib.ptx")
    path.write_bytes(code)
    for image in (path, str(path)):
        with cu.Library.load(image) as lib:
            _axpy(lib.kernel(code.lowered_names["axpy<float>"]), stream, 5.0)


def _two_devices_reason() -> str | None:
    reason = gpu_unavailable_reason()
    if reason is not None:
        return reason
    n = cu.Device.count()
    return None if n >= 2 else f"needs two GPUs; this machine has {n}"


@pytest.mark.gpu
@needs_nvrtc
def test_one_library_launches_on_both_gpus(ctx: cu.Context) -> None:
    reason = _two_devices_reason()
    if reason is not None:
        pytest.skip(reason)
    d0, d1 = cu.Device(0), cu.Device(1)
    c0, c1 = d0.primary_context(), d1.primary_context()
    lib = cu.Library.load(_code_for([d0, d1]))
    k = lib.kernel("axpy<float>")
    s0 = cu.Stream(non_blocking=True, context=c0)
    s1 = cu.Stream(non_blocking=True, context=c1)
    try:
        # The same kernel object, loaded once, launched in both devices' contexts,
        # whichever context is current.
        c0.set_current()
        _axpy(k, s0, 2.0)
        _axpy(k, s1, 3.0)
        c1.set_current()
        _axpy(k, s0, 4.0)
        _axpy(k, s1, 5.0)
        for d in (d0, d1):
            assert k.attribute(cu.FunctionAttribute.MAX_THREADS_PER_BLOCK, d) >= 256
            assert k.attribute(cu.FunctionAttribute.NUM_REGS, device=d) > 0
        # a setting on one device leaves the other's alone
        dyn = cu.FunctionAttribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
        before = k.attribute(dyn, d1)
        k.set_attribute(dyn, before + 1024, d0)
        assert k.attribute(dyn, d0) == before + 1024
        assert k.attribute(dyn, d1) == before
        assert int(k.function(c0)) != int(k.function(c1))
    finally:
        s0.close()
        s1.close()
        lib.close()
        c0.set_current()


@pytest.mark.gpu
@needs_nvrtc
def test_one_library_launches_on_a_green_context(
    ctx: cu.Context, device: cu.Device, stream: cu.Stream, library: cu.Library
) -> None:
    k = library.kernel("axpy<float>")
    _axpy(k, stream, 2.0)  # the ordinary context first
    whole = cu.SMResource.of(device)
    n = max(whole.min_partition_size, whole.alignment)
    n += -n % whole.alignment
    groups, _rest = whole.split(n, 1)
    gc = cu.GreenContext(groups[0])
    gs = gc.create_stream()
    try:
        _axpy(k, gs, 7.0)  # no load in the green context: the driver does it
        with gc:
            _axpy(k, gs, 8.0)
            assert k.attribute(cu.FunctionAttribute.NUM_REGS) > 0  # the green context's device
            assert int(k.function()) == int(k.function(gc))
        plan = k.prepare(1, 32, np.float32(1.0), *_pair(gc), 32)
        plan.launch(gs)
        gs.synchronize()
    finally:
        gs.close()
        gc.close()


def _pair(context: cu.Context) -> tuple[cu.DeviceBuffer, cu.DeviceBuffer]:
    with context:
        return (
            cu.DeviceBuffer.from_array(np.zeros(32, dtype=np.float32)),
            cu.DeviceBuffer.from_array(np.zeros(32, dtype=np.float32)),
        )
