"""Which implementation runs (compiled core or pure Python), and how it is chosen."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import weakref

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver import _handle, _impl
from cudriver._handle import Handle
from cudriver.event import Event
from cudriver.graph import GraphExec
from cudriver.kernel import Kernel, LaunchPlan
from cudriver.stream import Stream

ADOPTED = {
    Stream: (
        "synchronize",
        "query",
        "wait",
        "record",
        "__cuda_stream__",
        "launch_host_func",
        "write_value32",
        "wait_value32",
        "write_value64",
        "wait_value64",
    ),
    Event: ("record", "query", "synchronize"),
    GraphExec: ("launch", "upload"),
    Kernel: ("launch",),
    LaunchPlan: ("launch",),
    cu.DeviceBuffer: ("__init__", "close"),
}


def test_info_names_the_implementation() -> None:
    info = cu.info()
    assert info["version"] == cu.__version__
    assert info["bindings"] == cu.bindings_version()
    assert info["implementation"] == ("compiled" if _impl.COMPILED else "pure-python")
    assert isinstance(info["implementation_reason"], str) and info["implementation_reason"]


def test_environment_variable_selects_pure_python() -> None:
    if os.environ.get("CUDRIVER_PURE_PYTHON", "") not in ("", "0"):
        assert not _impl.COMPILED
        assert cu.info()["implementation_reason"] == "CUDRIVER_PURE_PYTHON is set"


def test_a_child_with_the_variable_runs_pure_python() -> None:
    env = dict(os.environ, CUDRIVER_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", "import cudriver; print(cudriver.info()['implementation'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "pure-python"


def test_compiled_core_built_where_expected() -> None:
    # CI sets CUDRIVER_EXPECT_COMPILED where a C compiler was present at install time:
    # a build that silently fell back to pure Python fails here.
    if os.environ.get("CUDRIVER_EXPECT_COMPILED") == "1" and not os.environ.get(
        "CUDRIVER_PURE_PYTHON"
    ):
        assert _impl.COMPILED, _impl.REASON


@pytest.mark.parametrize("cls", list(ADOPTED))
def test_hot_methods_come_from_the_implementation_in_use(cls: type) -> None:
    for name in ADOPTED[cls]:
        method = getattr(cls, name)
        if _impl.COMPILED:
            assert not inspect.isfunction(method), f"{cls.__name__}.{name} is pure Python"
            pure = getattr(cls, f"_py_{name}")
            assert inspect.isfunction(pure)
            if name != "__init__":  # a slot wrapper's docstring cannot be set
                assert method.__doc__ == pure.__doc__  # the documentation is shared
        else:
            assert inspect.isfunction(method)
            assert not hasattr(cls, f"_py_{name}")


def test_a_weakref_finalize_per_handle_only_in_pure_python() -> None:
    class Probe(Handle):
        __slots__ = ()
        _kind = "Probe"

    before = len(weakref.finalize._registry)  # type: ignore[attr-defined]
    p = Probe.__new__(Probe)
    p._init_handle(drv.CUstream(0x99), release=None, func="cuProbeDestroy", owned=False)
    made = len(weakref.finalize._registry) - before  # type: ignore[attr-defined]
    if _impl.COMPILED:
        assert p._finalizer is None and made == 0  # the root type's deallocator serves
    else:
        assert p._finalizer is not None and made == 1
    assert type(p._state) is _handle._State
    if _impl.COMPILED:
        assert _handle._State is _impl.core.State
    p.close()


def test_adopt_refuses_a_method_the_core_lacks() -> None:
    if not _impl.COMPILED:
        _impl.adopt(Stream, "no_such_method")  # pure: a no-op
        return

    class Odd(_impl.StreamCore):  # type: ignore[misc, valid-type]
        def not_compiled(self) -> None:
            """Not in the core."""

    with pytest.raises(RuntimeError, match="no Odd.not_compiled"):
        _impl.adopt(Odd, "not_compiled")
