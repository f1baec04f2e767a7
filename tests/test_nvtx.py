"""NVTX: ranges of the program's own and marks of cudriver's operations, counted by a tool.

An NVTX tool is a library named by ``NVTX_INJECTION64_PATH``, loaded at the first NVTX
call of a process. ``tests/_nvtx_counter.c`` is one that counts what it is told; it is
built here with the C compiler (skipped without one) and a child process runs with it,
then dumps the counts. Without a GPU: ``cudriver.nvtx_range`` (``with``, decorator,
domains) and the ``"cudriver"`` domain's ranges and marks of the call sites that report
before any driver call. With a GPU: captures, graph launches, allocations, host
functions and synchronisations of a real program. The ``nvtx`` package is optional
(not in the ``test`` extra): these tests skip without it, except those of its absence.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import cudriver as cu
from cudriver._observe import nvtx as cu_nvtx
from cudriver._runtime import _hooks

from ._support import package_root

HERE = Path(__file__).resolve().parent
NO_NVTX = "the nvtx package is not installed (pip install nvtx, or the extra '.[nvtx]')"
needs_nvtx = pytest.mark.skipif(importlib.util.find_spec("nvtx") is None, reason=NO_NVTX)


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The counting NVTX tool, built from ``tests/_nvtx_counter.c``."""
    cc = _compiler()
    if cc is None:
        pytest.skip("needs a C compiler (cc, gcc or clang; or set CC) to build the NVTX tool")
    lib = tmp_path_factory.mktemp("nvtx") / "libnvtx_counter.so"
    p = subprocess.run(
        [
            cc,
            "-O2",
            "-Wall",
            "-shared",
            "-fPIC",
            "-o",
            str(lib),
            str(HERE / "_nvtx_counter.c"),
            "-lpthread",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return lib


@pytest.fixture(autouse=True)
def _marks_off() -> Iterator[None]:
    cu.set_nvtx_marks(False)
    yield
    cu.set_nvtx_marks(False)
    assert _hooks.MARKS == []


class Counts:
    """What the tool counted: ``(kind, domain, message) -> (count, payload sum)``."""

    def __init__(self, text: str) -> None:
        self.events: dict[tuple[str, str, str], tuple[int, int]] = {}
        self.totals: dict[str, int] = {}
        for line in text.splitlines():
            parts = line.split("\t")
            if parts[0].startswith("#"):
                self.totals[parts[0][1:]] = int(parts[1])
            else:
                kind, domain, message, count, payload = parts
                self.events[(kind, domain, message)] = (int(count), int(payload))

    def count(self, kind: str, domain: str, message: str) -> int:
        return self.events.get((kind, domain, message), (0, 0))[0]

    def payload(self, kind: str, domain: str, message: str) -> int:
        return self.events.get((kind, domain, message), (0, 0))[1]

    def per_domain(self, kind: str) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for (k, d, _m), (n, _p) in self.events.items():
            if k == kind:
                out[d] += n
        return dict(out)

    def assert_balanced(self) -> None:
        """Every range pushed was popped, on its own thread."""
        assert self.totals["inits"] >= 1
        assert self.totals["underflow"] == 0
        assert self.totals["overflow"] == 0
        assert self.per_domain("push") == self.per_domain("pop")


_PRELUDE = """
import ctypes, sys
import cudriver as cu

def dump():
    lib = ctypes.CDLL(sys.argv[1])
    assert lib.nvtx_counter_dump(sys.argv[2].encode()) == 0
"""


def _run(counter: Path, tmp_path: Path, body: str) -> Counts:
    script = tmp_path / "child.py"
    script.write_text(_PRELUDE + textwrap.dedent(body) + "\ndump()\n", encoding="utf-8")
    out = tmp_path / "counts.tsv"
    env = dict(os.environ)
    env["NVTX_INJECTION64_PATH"] = str(counter)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root(), env.get("PYTHONPATH")]))
    p = subprocess.run(
        [sys.executable, "-X", "faulthandler", str(script), str(counter), str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    return Counts(out.read_text(encoding="utf-8"))


# -- without a GPU ------------------------------------------------------------------------


@needs_nvtx
def test_ranges_are_counted_by_an_injected_tool(counter: Path, tmp_path: Path) -> None:
    counts = _run(
        counter,
        tmp_path,
        """
        with cu.nvtx_range("outer", color="green"):
            with cu.nvtx_range("inner", domain="mine", category="phase"):
                pass
        again = cu.nvtx_range("again", color=0xFF76B900)
        for _ in range(3):
            with again:
                pass

        @cu.nvtx_range()
        def work(x):
            return x + 1

        assert work(1) == 2 and work(2) == 3 and work.__name__ == "work"

        @cu.nvtx_range("named")
        def fails():
            raise KeyError("popped anyway")

        try:
            fails()
        except KeyError:
            pass
        """,
    )
    assert counts.count("push", "", "outer") == 1
    assert counts.count("push", "mine", "inner") == 1
    assert counts.count("push", "", "again") == 3
    assert counts.count("push", "", "work") == 2  # the function's name by default
    assert counts.count("push", "", "named") == 1
    assert "cudriver" not in counts.per_domain("push")  # its marks are off by default
    counts.assert_balanced()


@needs_nvtx
def test_cudrivers_operations_are_marked_in_their_domain(counter: Path, tmp_path: Path) -> None:
    # Without a GPU: the hooks the operations call, and the call sites that tell the
    # hooks before their driver call (which then fails: there is no driver here).
    counts = _run(
        counter,
        tmp_path,
        """
        from cudriver._runtime import _hooks

        ctx = cu.Context.from_handle(0x1234)
        buf = cu.DeviceBuffer.from_handle(0x10000, 64, context=ctx)
        _hooks.mark("DeviceBuffer", 1)  # off: not recorded
        cu.set_nvtx_marks()
        assert cu.nvtx_marks_enabled()
        for call in (cu.Stream.from_handle(0x1230).synchronize, buf.copy_to):
            try:
                call()
            except cu.CudaError:  # no driver here
                pass
        _hooks.end(_hooks.host_wait("Stream.synchronize (cuStreamSynchronize)"))
        _hooks.mark("DeviceBuffer", 4096)
        _hooks.mark("DeviceBuffer", 100)
        _hooks.mark("GraphExec.launch")
        _hooks.pop(_hooks.push("Stream.capture"))

        # A host function as the driver's thread runs it (the compiled trampoline), and
        # a release that waits for the device (the compiled release), without a driver.
        from cuda.bindings import driver as drv
        from cudriver._lifetime import _hostfn, _release

        ran = []

        def note(tag):
            ran.append(tag)

        _hostfn._eager[10**9] = (note, ("x",), None, 1, 1)
        _hostfn.run_record(10**9)
        assert ran == ["x"]
        free = lambda h: (drv.CUresult.CUDA_SUCCESS,)
        _release.release_state(_release.State(1, free, "cuMemFree", "DeviceBuffer", (), None))
        cu.set_nvtx_marks(False)
        assert not cu.nvtx_marks_enabled() and not _hooks.ON
        _hooks.mark("DeviceBuffer", 1)  # off again: not recorded
        with cu.nvtx_range("mine"):
            pass
        """,
    )
    d = "cudriver"
    assert counts.count("push", d, "Stream.synchronize (cuStreamSynchronize)") == 2
    assert counts.count("push", d, "DeviceBuffer.copy_to without stream= (cuEventSynchronize)") == 1
    assert counts.count("mark", d, "DeviceBuffer") == 2
    assert counts.payload("mark", d, "DeviceBuffer") == 4196  # the sizes, as payloads
    assert counts.count("mark", d, "GraphExec.launch") == 1
    assert counts.count("push", d, "Stream.capture") == 1
    assert counts.count("push", d, "host function __main__.note") == 1
    assert counts.count("push", d, "DeviceBuffer.close (cuMemFree waits for the device)") == 1
    assert counts.count("push", "", "mine") == 1
    counts.assert_balanced()


@needs_nvtx
def test_ranges_without_a_tool_cost_no_error() -> None:
    # This process has no tool attached: NVTX calls are no-ops.
    with cu.nvtx_range("x"):
        pass
    cu.set_nvtx_marks()
    assert _hooks.ON and len(_hooks.MARKS) == 1
    _hooks.end(_hooks.host_wait("Stream.synchronize (cuStreamSynchronize)"))
    _hooks.mark("DeviceBuffer", 4096)
    cu.set_nvtx_marks()  # idempotent
    assert len(_hooks.MARKS) == 1
    cu.set_nvtx_marks(False)
    assert _hooks.ON == [] and _hooks.MARKS == []


def test_without_the_nvtx_package_a_range_fails_when_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx raises ImportError
    monkeypatch.setattr(cu_nvtx, "_module", None)
    r = cu.nvtx_range("made without nvtx")  # fine: nothing imported yet
    with pytest.raises(ImportError, match=r"pip install nvtx"):
        with r:
            pass  # pragma: no cover

    @cu.nvtx_range()
    def f() -> int:
        return 1  # pragma: no cover

    with pytest.raises(ImportError, match=r"\.\[nvtx\]"):
        f()
    with pytest.raises(ImportError, match="nvtx"):
        cu.set_nvtx_marks()
    assert _hooks.MARKS == [] and not cu.nvtx_marks_enabled()
    cu.set_nvtx_marks(False)  # turning off needs nothing


def test_import_cudriver_does_not_import_nvtx() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root(), env.get("PYTHONPATH")]))
    code = "import sys, cudriver; assert 'nvtx' not in sys.modules, 'nvtx imported'"
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stderr


def test_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="message must be str or None"):
        cu.nvtx_range(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="color must be str or int or None"):
        cu.nvtx_range("x", color=True)
    with pytest.raises(TypeError, match="domain"):
        cu.nvtx_range("x", domain=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="category"):
        cu.nvtx_range("x", category=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decorates a callable"):
        cu.nvtx_range("x")(3)  # type: ignore[type-var]
    with pytest.raises(TypeError, match="enabled must be a bool"):
        cu.set_nvtx_marks(1)  # type: ignore[arg-type]
    r = cu.nvtx_range("step", color="green", domain="mine")
    assert isinstance(r, cu.NvtxRange)
    assert repr(r) == "<cudriver.NvtxRange 'step' color='green' domain='mine'>"
    assert cu.NvtxRange.__module__ == "cudriver" and cu.nvtx_range.__module__ == "cudriver"


# -- with a GPU ------------------------------------------------------------------------------


@pytest.mark.gpu
@needs_nvtx
def test_a_programs_operations_are_counted_by_an_injected_tool(
    counter: Path, tmp_path: Path
) -> None:
    counts = _run(
        counter,
        tmp_path,
        """
        import numpy as np

        cu.set_nvtx_marks()
        ran = []

        def note(tag):
            ran.append(tag)

        s = cu.Stream()
        buf = cu.DeviceBuffer(1 << 20)  # cuMemAlloc (the compiled path)
        ordered = cu.DeviceBuffer(4096, stream=s)  # cuMemAllocAsync (the compiled path)
        with cu.nvtx_range("program"):
            with s.capture() as g:  # a host node: GraphExec.launch takes its slow path
                ordered.fill(1, stream=s)
                s.launch_host_func(note, "replay")
            with s.capture() as g2:  # no host node: the compiled GraphExec.launch
                ordered.fill(2, stream=s)
            exe, exe2 = g.instantiate(), g2.instantiate()
            for _ in range(3):
                exe.launch(s)
            for _ in range(2):
                exe2.launch(s)
            s.launch_host_func(note, "eager")
            s.synchronize()
            host = buf.copy_to()  # stream-less: waits
            assert host.nbytes == 1 << 20
            assert ran == ["replay"] * 3 + ["eager"], ran
            buf.close()  # cuMemFree waits for the device
            ordered.close()  # stream-ordered: only enqueued
            s.synchronize()
        for o in (exe, exe2, g, g2):
            o.close()
        s.close()
        cu.set_nvtx_marks(False)
        """,
    )
    d = "cudriver"
    assert counts.count("push", d, "Stream.capture") == 2
    assert counts.count("mark", d, "GraphExec.launch") == 5
    assert counts.count("mark", d, "DeviceBuffer") == 2
    assert counts.payload("mark", d, "DeviceBuffer") == (1 << 20) + 4096
    assert counts.count("push", d, "host function __main__.note") == 4  # on the driver's thread
    assert counts.count("push", d, "Stream.synchronize (cuStreamSynchronize)") == 2
    assert counts.count("push", d, "DeviceBuffer.copy_to without stream= (cuEventSynchronize)") == 1
    assert counts.count("push", d, "DeviceBuffer.close (cuMemFree waits for the device)") == 1
    assert counts.count("push", "", "program") == 1
    counts.assert_balanced()
