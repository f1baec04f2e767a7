"""The compiled core: part of every install, one body per hot method."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import weakref

import pytest
from cuda.bindings import driver as drv

import cudriver as cu
from cudriver._graph.graph import GraphExec
from cudriver._launch.kernel import Kernel
from cudriver._launch.plan import LaunchPlan
from cudriver._lifetime import _handle, _release
from cudriver._lifetime._handle import Handle
from cudriver._work.event import Event
from cudriver._work.stream import Stream

COMPILED_METHODS = {
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

CORE = {
    Stream: "cudriver._work._core",
    Event: "cudriver._work._core",
    GraphExec: "cudriver._graph._core",
    Kernel: "cudriver._launch._core",
    LaunchPlan: "cudriver._launch._core",
    cu.DeviceBuffer: "cudriver._memory._core",
}

_SLOW = {"__init__": "_init_slow", "__cuda_stream__": "_cuda_stream_slow"}


def _slow(name: str) -> str:
    return _SLOW.get(name, f"_{name}_slow")


def test_info_names_the_compiled_core() -> None:
    info = cu.info()
    assert info["version"] == cu.__version__
    assert info["bindings"] == cu.bindings_version()
    assert info["implementation"] == "compiled"
    assert info["implementation_reason"] == "compiled core loaded"


def test_the_retired_variable_changes_nothing() -> None:
    # CUDRIVER_PURE_PYTHON once chose a pure-Python implementation; there is none now.
    env = dict(os.environ, CUDRIVER_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", "import cudriver; print(cudriver.info()['implementation'])"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "compiled"


def test_no_method_is_swapped_at_import() -> None:
    # One body per method: the retired swap kept a copy of each as _py_<name>.
    for cls in (*COMPILED_METHODS, Handle):
        assert not [n for n in dir(cls) if n.startswith("_py_")], cls
    assert not hasattr(cu, "_impl")
    assert not hasattr(cu, "_core")  # no run-time configure step either


@pytest.mark.parametrize("cls", list(COMPILED_METHODS))
def test_hot_methods_are_the_cores_and_documented(cls: type) -> None:
    for name in COMPILED_METHODS[cls]:
        method = getattr(cls, name)
        assert not inspect.isfunction(method), f"{cls.__name__}.{name} is not compiled"
        owner = getattr(method, "__objclass__", None)  # a slot wrapper: __init__
        module = owner.__module__ if owner is not None else method.__module__
        # The compiled module of the class's layer.
        assert module == CORE[cls], (cls, name, module)
        # The slow path is a plainly named method of the public class.
        assert inspect.isfunction(cls.__dict__[_slow(name)]), (cls, name)
        if name != "__init__":  # the class documents its constructor
            assert method.__doc__ and "``" in method.__doc__, (cls, name)


def test_no_weakref_finalize_per_handle() -> None:
    class Probe(Handle):
        __slots__ = ()
        _kind = "Probe"

    before = len(weakref.finalize._registry)  # type: ignore[attr-defined]
    p = Probe.__new__(Probe)
    p._init_handle(drv.CUstream(0x99), release=None, func="cuProbeDestroy", owned=False)
    made = len(weakref.finalize._registry) - before  # type: ignore[attr-defined]
    assert p._finalizer is None and made == 0  # the root type's deallocator serves
    assert type(p._state) is _handle._State is _release.State
    p.close()
