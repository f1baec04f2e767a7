"""NVRTC compilation: argument checks without NVRTC, compiling with it."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

import cudriver as cu
from cudriver._launch import program
from cudriver._launch.program import NvrtcNotFoundError, arch_option, compile, nvrtc_version

from ._support import AXPY_KERNEL, needs_nvrtc

# -- without NVRTC ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "ptx", "cubin"),
    [
        ("sm_90", "compute_90", "sm_90"),
        ("compute_90", "compute_90", "sm_90"),
        ("SM_86", "compute_86", "sm_86"),
        ("sm_90a", "compute_90a", "sm_90a"),
        ("sm_100f", "compute_100f", "sm_100f"),
        ("lto_89", "compute_89", "sm_89"),
        ("90", "compute_90", "sm_90"),
        ("9.0", "compute_90", "sm_90"),
        ((8, 0), "compute_80", "sm_80"),
        (cu.ComputeCapability(12, 0), "compute_120", "sm_120"),
    ],
)
def test_arch_option(arch: Any, ptx: str, cubin: str) -> None:
    assert arch_option(arch, "ptx") == f"--gpu-architecture={ptx}"
    assert arch_option(arch, "cubin") == f"--gpu-architecture={cubin}"


def test_arch_option_takes_a_device_like() -> None:
    class FakeDevice:
        compute_capability = cu.ComputeCapability(7, 5)

    assert arch_option(FakeDevice(), "cubin") == "--gpu-architecture=sm_75"


@pytest.mark.parametrize("arch", ["sm90", "sm_9", "gfx90a", "", "sm_90b", (9,), (9, 10), (0, 0)])
def test_bad_arch_values(arch: Any) -> None:
    with pytest.raises(ValueError, match="architecture|compute capability|major"):
        arch_option(arch)


@pytest.mark.parametrize("arch", [90, 9.0, None, ("9", "0"), [9, 0]])
def test_bad_arch_types(arch: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        arch_option(arch)


def test_bad_inputs_are_refused_before_nvrtc() -> None:
    # These run on machines without NVRTC: validation comes first.
    with pytest.raises(ValueError, match="target must be 'ptx', 'cubin' or 'ltoir'"):
        compile(AXPY_KERNEL, arch="sm_90", target="fatbin")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sequence of strings"):
        compile(AXPY_KERNEL, arch="sm_90", options="--use_fast_math")
    with pytest.raises(TypeError, match="each option must be a str"):
        compile(AXPY_KERNEL, arch="sm_90", options=[3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="either as arch= or in options"):
        compile(AXPY_KERNEL, arch="sm_90", options=["--gpu-architecture=sm_80"])
    with pytest.raises(ValueError, match="either as arch= or in options"):
        compile(AXPY_KERNEL, arch="sm_90", options=["-arch=sm_80"])
    with pytest.raises(TypeError, match="source must be a str or bytes"):
        compile(123, arch="sm_90")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers must"):
        compile(AXPY_KERNEL, arch="sm_90", headers=[("a.h", "")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="headers must map"):
        compile(AXPY_KERNEL, arch="sm_90", headers={"a.h": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        compile(AXPY_KERNEL, arch="sm90")


def test_missing_nvrtc_as_it_really_is_here() -> None:
    """On a machine without libnvrtc (like CI), the error says what to install."""
    from cuda.bindings import nvrtc

    try:
        nvrtc.nvrtcVersion()
    except Exception as exc:
        raw: Exception | None = exc
    else:
        raw = None
    if raw is None:
        pytest.skip("NVRTC is installed on this machine")
    with pytest.raises(NvrtcNotFoundError) as ei:
        compile(AXPY_KERNEL, arch="sm_90")
    msg = str(ei.value)
    assert "cudriver[nvrtc]" in msg
    assert "nvidia-cuda-nvrtc" in msg
    assert "libnvrtc" in msg
    assert isinstance(ei.value, ImportError)
    with pytest.raises(NvrtcNotFoundError, match=r"cudriver\[nvrtc\]"):
        nvrtc_version()


def _unload_nvrtc(monkeypatch: pytest.MonkeyPatch, version: Callable[[], Any]) -> None:
    """Make the next NVRTC use load it afresh, with ``version`` as ``nvrtcVersion``."""
    from cuda.bindings import nvrtc

    monkeypatch.setattr(program, "_nvrtc_mod", None)
    monkeypatch.setattr(program, "_version", None)
    monkeypatch.setattr(nvrtc, "nvrtcVersion", version)


def test_missing_library_is_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    """What cuda.pathfinder raises when libnvrtc is absent becomes NvrtcNotFoundError."""
    from cuda.pathfinder import DynamicLibNotFoundError

    def missing() -> Any:
        raise DynamicLibNotFoundError('Failure finding "libnvrtc.so.13"')

    _unload_nvrtc(monkeypatch, missing)
    with pytest.raises(NvrtcNotFoundError, match=r"cudriver\[nvrtc\]") as ei:
        nvrtc_version()
    assert "libnvrtc.so.13" in str(ei.value)
    assert ei.value.name == "cuda.bindings.nvrtc"
    again = pickle.loads(pickle.dumps(ei.value))
    assert str(again) == str(ei.value)


def test_other_errors_are_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> Any:
        raise KeyError("unrelated")

    _unload_nvrtc(monkeypatch, broken)
    with pytest.raises(KeyError, match="unrelated"):
        nvrtc_version()


def test_compile_error_pickles() -> None:
    e = cu.CompileError("NVRTC failed to compile 'k.cu'", "k.cu(1): error: oops")
    again = pickle.loads(pickle.dumps(e))
    assert again.log == e.log and str(again) == str(e)


# -- with NVRTC (no GPU needed when arch is given) ----------------------------------------


@needs_nvrtc
def test_nvrtc_version() -> None:
    from cuda.bindings import nvrtc

    status, raw_major, raw_minor = nvrtc.nvrtcVersion()
    assert status == nvrtc.nvrtcResult.NVRTC_SUCCESS
    major, minor = nvrtc_version()
    assert (major, minor) == (raw_major, raw_minor)
    assert major >= 12
    assert minor <= 9


@needs_nvrtc
def test_compile_ptx() -> None:
    ptx = compile(AXPY_KERNEL, arch="sm_90")
    assert isinstance(ptx, bytes)
    assert b".version" in ptx
    assert b".target sm_90" in ptx
    assert b".entry axpy" in ptx
    assert not ptx.endswith(b"\0")
    ptx.decode("ascii")


@needs_nvrtc
def test_compile_cubin() -> None:
    cubin = compile(AXPY_KERNEL, arch=(9, 0), target="cubin", options=["-lineinfo"])
    assert cubin.startswith(b"\x7fELF")
    assert b"axpy" in cubin


@needs_nvrtc
def test_arch_in_options() -> None:
    ptx = compile(AXPY_KERNEL, options=("--gpu-architecture=compute_80",))
    assert b".target sm_80" in ptx


@needs_nvrtc
def test_headers_and_options() -> None:
    src = '#include "scale.h"\nextern "C" __global__ void k(float* p) { p[0] = SCALE * 2.0f; }\n'
    ptx = compile(src, arch="sm_90", headers={"scale.h": "#define SCALE 3.0f\n"})
    assert b".entry k" in ptx
    ptx2 = compile(
        b'extern "C" __global__ void k(float* p) { p[0] = VALUE; }',
        arch="compute_90",
        options=[b"-DVALUE=1.0f", "--use_fast_math"],
    )
    assert b".entry k" in ptx2


@needs_nvrtc
def test_compile_error_carries_the_log() -> None:
    bad = 'extern "C" __global__ void broken(int* p) { p[0] = undefined_name; }\n'
    with pytest.raises(cu.CompileError) as ei:
        compile(bad, name="broken.cu", arch="sm_90")
    err = ei.value
    assert "broken.cu" in str(err)
    assert "NVRTC_ERROR_COMPILATION" in str(err)
    assert "undefined_name" in err.log
    assert "broken.cu" in err.log
    assert err.log in str(err)


@needs_nvrtc
def test_bad_option_is_a_compile_error() -> None:
    with pytest.raises(cu.CompileError, match="NVRTC_ERROR_INVALID_OPTION"):
        compile(AXPY_KERNEL, arch="sm_90", options=["--no-such-option"])


@needs_nvrtc
@pytest.mark.gpu
def test_default_arch_is_the_current_device(ctx: cu.Context) -> None:
    cc = ctx.device.compute_capability
    ptx = compile(AXPY_KERNEL)
    assert f".target sm_{cc.major}{cc.minor}".encode() in ptx
    cubin = compile(AXPY_KERNEL, target="cubin")
    assert cubin.startswith(b"\x7fELF")
