"""cudriver.compat: the bindings' return shape, with failures raised.

The tests without a GPU run the mirror over stand-in bindings modules; the GPU tests
run programs written in the raw style of NVIDIA's samples, once with the bindings and
once with only their import lines changed, and compare what they print.
"""

from __future__ import annotations

import ctypes
import pickle
import subprocess
import sys
import types
from typing import Any

import pytest
from cuda.bindings import driver as drv
from cuda.bindings import nvrtc as raw_nvrtc

import cudriver as cu
from cudriver._runtime import _mirror
from cudriver.compat import driver as compat_driver
from cudriver.compat import nvrtc as compat_nvrtc
from cudriver.compat import runtime as compat_runtime

from . import _raw_programs

R = drv.CUresult


def _fake_driver() -> types.ModuleType:
    m = types.ModuleType("fake_driver")
    m.CUresult = R  # type: ignore[attr-defined]
    m.CU_THING = 7  # type: ignore[attr-defined]
    m.calls = []  # type: ignore[attr-defined]

    def cuMemAlloc(n: int) -> tuple[Any, ...]:
        m.calls.append(("cuMemAlloc", n))  # type: ignore[attr-defined]
        if n > 1 << 40:
            return (R.CUDA_ERROR_OUT_OF_MEMORY, None)
        return (R.CUDA_SUCCESS, 0x1000)

    def cuStreamQuery(s: int) -> tuple[Any, ...]:
        return (R.CUDA_ERROR_NOT_READY,) if s else (R.CUDA_SUCCESS,)

    def cuCtxSynchronize() -> tuple[Any, ...]:
        return (R.CUDA_ERROR_ILLEGAL_ADDRESS,)

    def cuMemGetInfo() -> tuple[Any, ...]:
        return (R.CUDA_SUCCESS, 5, 10)

    for f in (cuMemAlloc, cuStreamQuery, cuCtxSynchronize, cuMemGetInfo):
        setattr(m, f.__name__, f)
    return m


@pytest.fixture
def faces() -> tuple[Any, Any]:
    raw = _fake_driver()
    compat = _mirror.Mirror(raw, "test.compat", "cu", "compat", guard=False)
    checked = _mirror.Mirror(raw, "test.checked", "cu", "checked")
    return compat, checked


def test_the_compat_face_returns_the_bindings_tuples(faces: tuple[Any, Any]) -> None:
    compat, checked = faces
    assert compat.attr("cuMemAlloc")(1024) == (R.CUDA_SUCCESS, 0x1000)
    assert compat.attr("cuMemGetInfo")() == (R.CUDA_SUCCESS, 5, 10)
    err, ptr = compat.attr("cuMemAlloc")(16)  # existing code unpacks the same way
    assert err == R.CUDA_SUCCESS and ptr == 0x1000
    # The checked face of the same module returns the outputs alone.
    assert checked.attr("cuMemAlloc")(1024) == 0x1000
    assert checked.attr("cuMemGetInfo")() == (5, 10)


def test_the_compat_face_raises_what_the_checked_face_raises(faces: tuple[Any, Any]) -> None:
    compat, checked = faces
    with pytest.raises(cu.OutOfMemoryError) as a:
        compat.attr("cuMemAlloc")(1 << 50)
    with pytest.raises(cu.OutOfMemoryError) as b:
        checked.attr("cuMemAlloc")(1 << 50)
    assert str(a.value) == str(b.value)
    assert a.value.func == "cuMemAlloc" and a.value.code is R.CUDA_ERROR_OUT_OF_MEMORY
    with pytest.raises(cu.LaunchError, match="cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS"):
        compat.attr("cuCtxSynchronize")()


def test_answers_are_returned_not_raised(faces: tuple[Any, Any]) -> None:
    compat, checked = faces
    assert compat.attr("cuStreamQuery")(1) == (R.CUDA_ERROR_NOT_READY,)
    assert compat.attr("cuStreamQuery")(0) == (R.CUDA_SUCCESS,)
    with pytest.raises(cu.NotReadyError):  # the checked face raises, as before
        checked.attr("cuStreamQuery")(1)


def test_names_pass_through_and_functions_are_made_once(faces: tuple[Any, Any]) -> None:
    compat, _ = faces
    assert compat.attr("CUresult") is R and compat.attr("CU_THING") == 7
    assert compat.attr("cuMemAlloc") is compat.attr("cuMemAlloc")
    assert compat.attr("cuMemAlloc").__name__ == "cuMemAlloc"
    with pytest.raises(AttributeError, match="'test.compat' has no attribute 'cuNope'"):
        compat.attr("cuNope")
    assert "cuMemAlloc" in compat.names()
    with pytest.raises(ValueError, match="face"):
        _mirror.Mirror(types.ModuleType("x"), "x", "cu", "loose")


def test_the_real_modules_mirror_every_name() -> None:
    assert compat_driver.CUresult is drv.CUresult
    assert compat_driver.CUstream is drv.CUstream
    assert set(dir(drv)) <= set(dir(compat_driver))
    assert compat_nvrtc.nvrtcResult is raw_nvrtc.nvrtcResult
    with pytest.raises(AttributeError, match="cudriver.compat.driver"):
        compat_driver.cuNoSuchCall  # noqa: B018
    # cuLaunchHostFunc is the safe one; _v2 is refused as in the checked mirror.
    assert compat_driver.cuLaunchHostFunc.__module__ == "cudriver.compat.driver"
    with pytest.raises(cu.NotSupportedError, match="cuLaunchHostFunc_v2"):
        compat_driver.cuLaunchHostFunc_v2(None, None, None)


def test_without_a_driver_the_first_call_says_so() -> None:
    if cu_driver_present():
        pytest.skip("a driver is installed here")
    with pytest.raises(cu.DriverNotFoundError):
        compat_driver.cuInit(0)


def cu_driver_present() -> bool:
    from .conftest import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    return reason is None or "no NVIDIA driver" not in reason


def test_runtime_failures_get_the_driver_class_of_the_same_meaning() -> None:
    from cuda.bindings import runtime as rt

    e = _mirror.runtime_error(rt, rt.cudaError_t.cudaErrorMemoryAllocation, "cudaMalloc")
    assert type(e) is cu.OutOfMemoryError
    assert str(e).startswith("cudaMalloc failed: cudaErrorMemoryAllocation (2): ")
    back = pickle.loads(pickle.dumps(e))
    assert back.code is rt.cudaError_t.cudaErrorMemoryAllocation and str(back) == str(e)
    other = _mirror.runtime_error(rt, rt.cudaError_t.cudaErrorInvalidPitchValue, "cudaMemcpy2D")
    assert type(other) is cu.CudaError
    assert compat_runtime.cudaError_t is rt.cudaError_t


def test_an_nvrtc_compile_failure_carries_the_program_log() -> None:
    fake = types.ModuleType("fake_nvrtc")
    R2 = raw_nvrtc.nvrtcResult
    log = b'kernel.cu(3): error: identifier "x" is undefined\n\x00'
    fake.nvrtcResult = R2  # type: ignore[attr-defined]
    fake.nvrtcCompileProgram = lambda prog, n, opts: (R2.NVRTC_ERROR_COMPILATION,)  # type: ignore[attr-defined]
    fake.nvrtcGetProgramLogSize = lambda prog: (R2.NVRTC_SUCCESS, len(log))  # type: ignore[attr-defined]

    def get_log(prog: Any, buf: bytes) -> tuple[Any, ...]:
        ctypes.memmove(ctypes.c_char_p(buf), log, len(log))  # as the bindings fill it
        return (R2.NVRTC_SUCCESS,)

    fake.nvrtcGetProgramLog = get_log  # type: ignore[attr-defined]
    m = _mirror.Mirror(fake, "test.nvrtc", "nvrtc", "compat", fail=_mirror.nvrtc_error, guard=False)
    with pytest.raises(cu.CompileError) as info:
        m.attr("nvrtcCompileProgram")("prog", 0, [])
    assert 'identifier "x" is undefined' in info.value.log
    assert str(info.value).startswith("nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6)")


# -- on the GPU -----------------------------------------------------------------------


def _run(script: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, (
        f"exit status {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}"
    )
    return proc.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(_raw_programs.PROGRAMS))
def test_a_raw_program_gives_the_same_result_with_its_imports_changed(name: str) -> None:
    raw = _run(_raw_programs.script(name, compat=False))
    compat = _run(_raw_programs.script(name, compat=True))
    print(f"{name}: {compat.strip()}")
    assert compat == raw
    assert "False" not in compat


@pytest.mark.gpu
def test_failures_injected_into_a_raw_program_raise_and_answers_return() -> None:
    out = _run(_raw_programs.COMPAT_IMPORTS + _raw_programs.HELPERS + _raw_programs.FAILURES)
    print(out)
    assert out.rstrip().endswith("OK")


def test_a_successful_cuinit_through_a_mirror_disarms_the_call_guard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cudriver.errors import GUARD

    raw = types.ModuleType("fake_driver")
    raw.CUresult = R  # type: ignore[attr-defined]
    raw.cuInit = lambda flags: (R.CUDA_SUCCESS,)  # type: ignore[attr-defined]
    raw.cuFail = lambda: (R.CUDA_ERROR_NOT_INITIALIZED,)  # type: ignore[attr-defined]
    inits: list[int] = []
    monkeypatch.setattr(GUARD, "initialized", False)
    monkeypatch.setattr(type(GUARD), "initialize", lambda self: inits.append(1))
    for face in ("compat", "checked"):
        m = _mirror.Mirror(raw, "test", "cu", face)
        result = m.attr("cuInit")(0)
        assert result == ((R.CUDA_SUCCESS,) if face == "compat" else None)
        with pytest.raises(cu.NotInitializedError):
            m.attr("cuFail")()
    assert inits == [1, 1]  # the guard initialised after each successful cuInit


def test_the_runtime_host_function_is_the_safe_one() -> None:
    assert compat_runtime.cudaLaunchHostFunc.__module__ == "cudriver.compat.runtime"
    with pytest.raises(cu.NotSupportedError, match="cudaLaunchHostFunc_v2"):
        compat_runtime.cudaLaunchHostFunc_v2(None, None, None)
    with pytest.raises(TypeError, match="fn must be"):
        compat_runtime.cudaLaunchHostFunc(0, "not a function", None)


@pytest.mark.gpu
def test_a_captured_runtime_host_function_replays() -> None:
    # The bindings' cudaLaunchHostFunc frees its callback data after the first call: a
    # captured one crashed (or ran freed memory) on the graph's second replay.
    out = _run(
        """
import ctypes
from cudriver.compat import runtime as cudart
check = lambda r: r[1:] if len(r) > 2 else (r[1] if len(r) == 2 else None)
ran = []
CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
cb = CB(lambda data: ran.append(data))
check(cudart.cudaFree(0))
stream = check(cudart.cudaStreamCreate())
mode = cudart.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal
check(cudart.cudaStreamBeginCapture(stream, mode))
check(cudart.cudaLaunchHostFunc(stream, cb, 42))
check(cudart.cudaLaunchHostFunc(stream, lambda data: ran.append(("py", data)), 7))
graph = check(cudart.cudaStreamEndCapture(stream))
exe = check(cudart.cudaGraphInstantiate(graph, 0))
for _ in range(5):
    check(cudart.cudaGraphLaunch(exe, stream))
check(cudart.cudaStreamSynchronize(stream))
assert ran == [42, ("py", 7)] * 5, ran
print("OK")
"""
    )
    assert out.rstrip().endswith("OK")
