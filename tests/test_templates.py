"""C++ templated kernels: name expressions, lowered names, the log on success, the cache."""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import cudriver as cu
from cudriver._launch import _compile_cache as cc
from cudriver._launch import program
from cudriver._launch.module import merged_lowered_names, not_found_hint

from ._support import needs_nvrtc

TEMPLATE = r"""
template <typename T>
__global__ void axpy(T a, const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

namespace scaled {
__device__ float factor = 2.5f;
template <int K>
__global__ void times(float* p, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = K * factor * p[i];
}
}
"""
NAMES = ["axpy<float>", "axpy<double>"]

WARNING = r"""
extern "C" __global__ void k(int* p) {
    int unused = 3;
    p[0] = 1;
}
"""


def fresh(src: str) -> str:
    """``src`` no earlier run has compiled: the cache has to miss once."""
    return src + f"\n// {uuid.uuid4().hex}\n"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache directory of this test's, and empty counters and memory."""
    d = tmp_path / "kernels"
    monkeypatch.setenv("CUDRIVER_CACHE_DIR", str(d))
    monkeypatch.delenv("CUDRIVER_CACHE", raising=False)
    monkeypatch.delenv("CUDRIVER_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setattr(cc, "_warned", set())
    cu.clear_compile_cache(disk=False)
    yield d
    cu.clear_compile_cache(disk=False)


# -- without NVRTC ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("names", "exc", "match"),
    [
        ("axpy<float>", TypeError, "sequence of strings.*not a single str"),
        (b"axpy", TypeError, "not a single bytes"),
        ([b"axpy<float>"], TypeError, "must be a str, not bytes"),
        ([1], TypeError, "must be a str, not int"),
        (["  "], ValueError, "non-empty C\\+\\+ name"),
        (5, TypeError, "sequence of strings, not int"),
    ],
)
def test_bad_name_expressions_are_refused_before_nvrtc(names: Any, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        cu.compile(TEMPLATE, arch="sm_90", name_expressions=names)


def test_compiled_code_is_bytes_with_its_fields() -> None:
    lowered = {"axpy<float>": "_Z4axpyIfEvT_PKS0_PS0_i"}
    code = cu.CompiledCode._make(b"\x7fELF...", "cubin", lowered, "a warning")
    assert isinstance(code, bytes) and code == b"\x7fELF..." and hash(code) == hash(b"\x7fELF...")
    assert dict(code.lowered_names) == lowered and code.log == "a warning"
    assert code.target == "cubin"
    assert type(bytes(code)) is bytes and code[:4] == b"\x7fELF"
    with pytest.raises(TypeError):
        code.lowered_names["x"] = "y"  # type: ignore[index]
    back = pickle.loads(pickle.dumps(code))
    assert type(back) is cu.CompiledCode and back == code
    assert dict(back.lowered_names) == lowered and back.log == "a warning"
    assert back.target == "cubin"
    assert "axpy<float>" in repr(code) and "cubin" in repr(code)
    assert cu.CompiledCode.__module__ == "cudriver"


def test_lowered_names_are_gathered_from_link_inputs() -> None:
    a = cu.CompiledCode._make(b"a", "ptx", {"f<1>": "_Z1fILi1EEvv"})
    b = cu.CompiledCode._make(b"b", "ptx", {"f<2>": "_Z1fILi2EEvv"})
    assert merged_lowered_names([a, (b, "ptx"), b"plain"]) == {
        "f<1>": "_Z1fILi1EEvv",
        "f<2>": "_Z1fILi2EEvv",
    }
    assert merged_lowered_names(b"bytes") == {}


def test_a_failed_lookup_points_to_name_expressions() -> None:
    assert "name_expressions" in not_found_hint("axpy", {})
    hint = not_found_hint("axpy<int>", {"axpy<float>": "_Z..."})
    assert "'axpy<float>'" in hint


def test_a_cache_entry_holds_code_and_metadata() -> None:
    meta = {"lowered_names": {"a<1>": "_Z1aILi1EEvv"}, "log": "warning"}
    payload = cc.pack_entry(b"\x00code\xff", meta)
    assert cc.unpack_entry(payload) == (b"\x00code\xff", meta)
    assert cc.unpack_entry(b"\x00code") is None  # not an entry of compile()'s
    assert cc.unpack_entry(payload[:12]) is None  # truncated inside the JSON's length
    broken = payload.replace(b'"log"', b'"log\xff')
    assert cc.unpack_entry(broken) is None


# -- with NVRTC (no GPU: the architecture is given) -------------------------------------------
@needs_nvrtc
def test_two_instantiations_get_their_lowered_names() -> None:
    code = cu.compile(TEMPLATE, arch="sm_90", name_expressions=NAMES, cache=False)
    assert isinstance(code, cu.CompiledCode) and isinstance(code, bytes)
    assert code.target == "ptx"
    assert list(code.lowered_names) == NAMES
    f, d = code.lowered_names["axpy<float>"], code.lowered_names["axpy<double>"]
    assert f.startswith("_Z4axpyIf") and d.startswith("_Z4axpyId")
    assert f".entry {f}".encode() in code and f".entry {d}".encode() in code
    cubin = cu.compile(TEMPLATE, arch="sm_90", target="cubin", name_expressions=NAMES)
    assert cubin.startswith(b"\x7fELF") and cubin.target == "cubin"
    assert dict(cubin.lowered_names) == dict(code.lowered_names)


@needs_nvrtc
def test_name_expressions_reach_namespaces_and_variables() -> None:
    names = ["scaled::times<3>", "&scaled::factor", "axpy<float>", "axpy<float>"]
    code = cu.compile(TEMPLATE, arch="sm_90", name_expressions=names, cache=False)
    assert list(code.lowered_names) == ["scaled::times<3>", "&scaled::factor", "axpy<float>"]
    assert "times" in code.lowered_names["scaled::times<3>"]
    assert "factor" in code.lowered_names["&scaled::factor"]


@needs_nvrtc
def test_without_name_expressions_nothing_is_lowered() -> None:
    code = cu.compile(WARNING, arch="sm_90", cache=False, options=["-w"])
    assert dict(code.lowered_names) == {} and code.log == ""


@needs_nvrtc
def test_a_name_that_names_nothing_is_a_compile_error() -> None:
    with pytest.raises(cu.CompileError) as ei:
        cu.compile(TEMPLATE, arch="sm_90", name_expressions=["nosuch<float>"], cache=False)
    assert "nosuch" in str(ei.value)


@needs_nvrtc
def test_the_log_on_success_holds_the_warnings() -> None:
    code = cu.compile(WARNING, name="warn.cu", arch="sm_90", cache=False)
    assert "unused" in code.log and "warn.cu" in code.log
    assert "warning" in code.log


@needs_nvrtc
def test_the_cache_keys_on_the_name_expressions_and_keeps_names_and_log(cache_dir: Path) -> None:
    src = fresh(TEMPLATE + WARNING)
    one = cu.compile(src, arch="sm_90", name_expressions=["axpy<float>"])
    two = cu.compile(src, arch="sm_90", name_expressions=NAMES)
    assert list(one.lowered_names) == ["axpy<float>"] and list(two.lowered_names) == NAMES
    info = cu.compile_cache_info()
    assert (info["misses"], info["disk_entries"]) == (2, 2)
    assert "unused" in two.log
    hit = cu.compile(src, arch="sm_90", name_expressions=NAMES)  # from memory
    assert cu.compile_cache_info()["memory_hits"] == 1
    assert hit == two and dict(hit.lowered_names) == dict(two.lowered_names)
    assert hit.log == two.log and hit.target == "ptx"
    cu.clear_compile_cache(disk=False)
    disk = cu.compile(src, arch="sm_90", name_expressions=NAMES)  # from disk
    assert cu.compile_cache_info()["disk_hits"] == 1
    assert disk == two and dict(disk.lowered_names) == dict(two.lowered_names)
    assert disk.log == two.log
    # The same names in another order are another key (their order is kept).
    cu.compile(src, arch="sm_90", name_expressions=NAMES[::-1])
    assert cu.compile_cache_info()["disk_entries"] == 3


@needs_nvrtc
def test_an_entry_that_does_not_decode_is_compiled_again(cache_dir: Path) -> None:
    src = fresh(TEMPLATE)
    first = cu.compile(src, arch="sm_90", name_expressions=NAMES)
    ((k, _),) = cc._memory.items()
    cc._memory[k] = b"not an entry"  # whole (its digest was checked), but not compile()'s
    again = cu.compile(src, arch="sm_90", name_expressions=NAMES)
    assert again == first and dict(again.lowered_names) == dict(first.lowered_names)
    # An entry whose names are not the job's is not used.
    assert program._from_cache(k, program._Job(b"", "", [], "ptx", [], [])) is None


# -- on a GPU -------------------------------------------------------------------------------------
def _run_axpy(k: cu.Kernel, stream: cu.Stream, dtype: Any, a: float) -> None:
    n = 1000
    x = np.arange(n, dtype=dtype)
    y = np.full(n, 1, dtype=dtype)
    bx, by = cu.DeviceBuffer.from_array(x), cu.DeviceBuffer.from_array(y)
    k.launch(stream, (n + 255) // 256, 256, dtype(a), bx, by, n)
    stream.synchronize()
    np.testing.assert_array_equal(by.copy_to().view(dtype), dtype(a) * x + 1)
    bx.close()
    by.close()


@pytest.mark.gpu
@needs_nvrtc
def test_two_instantiations_of_a_templated_kernel_run(ctx: cu.Context, stream: cu.Stream) -> None:
    code = cu.compile(TEMPLATE, arch=ctx.device, target="cubin", name_expressions=NAMES)
    with cu.Module.load(code) as m:
        assert dict(m.lowered_names) == dict(code.lowered_names)
        kf, kd = m.kernel("axpy<float>"), m.kernel("axpy<double>")
        assert kf.name == "axpy<float>" and kd.name == "axpy<double>"
        assert kf.param_sizes == (4, 8, 8, 4) and kd.param_sizes == (8, 8, 8, 4)
        assert m.kernel(code.lowered_names["axpy<float>"]) is kf  # the mangled name too
        _run_axpy(kf, stream, np.float32, 2.5)
        _run_axpy(kd, stream, np.float64, 1.0 / 3.0)
        with pytest.raises(cu.NotFoundError, match="axpy<int>.*name expressions"):
            m.kernel("axpy<int>")
    # bytes of the same code load too (the mangled names still find the kernels)
    with cu.Module.load(bytes(code)) as plain:
        assert dict(plain.lowered_names) == {}
        _run_axpy(plain.kernel(code.lowered_names["axpy<double>"]), stream, np.float64, 2.0)


@pytest.mark.gpu
@needs_nvrtc
def test_a_templated_global_by_its_name_expression(ctx: cu.Context, stream: cu.Stream) -> None:
    names = ["scaled::times<2>", "&scaled::factor"]
    code = cu.compile(TEMPLATE, arch=ctx.device, target="cubin", name_expressions=names)
    with cu.Module.load(code) as m:
        factor = m.get_global("&scaled::factor")
        assert factor.nbytes == 4
        factor.copy_from(np.array([3.0], dtype=np.float32))
        p = cu.DeviceBuffer.from_array(np.ones(64, dtype=np.float32))
        m.kernel("scaled::times<2>").launch(stream, 1, 64, p, 64)
        stream.synchronize()
        np.testing.assert_array_equal(p.copy_to().view(np.float32), np.full(64, 6.0, np.float32))
        p.close()


@pytest.mark.gpu
@needs_nvrtc
def test_linked_code_keeps_the_lowered_names(ctx: cu.Context, stream: cu.Stream) -> None:
    code = cu.compile(
        TEMPLATE, arch=ctx.device, target="cubin", relocatable=True, name_expressions=NAMES
    )
    with cu.Module.link([code], context=ctx) as m:
        assert dict(m.lowered_names) == dict(code.lowered_names)
        _run_axpy(m.kernel("axpy<float>"), stream, np.float32, 4.0)
