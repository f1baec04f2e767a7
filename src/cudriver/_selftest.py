"""End-to-end check of cudriver on a GPU: ``python -m cudriver selftest``.

Compiles kernels with NVRTC, runs one on a :class:`~cudriver.memory.DeviceBuffer`
and compares with numpy, then captures a graph holding kernels, a host function
and stream memory operations on mapped pinned memory, replays it three times and
checks every result. Prints one line per check (``PASS``/``FAIL`` and its time).

Its exit statuses are the command line's (:mod:`cudriver.__main__`), defined here:
0 when every check passed, 1 when one failed (or a CUDA error stopped the test), 2 for
a usage error, 3 (with one line on stderr) when no driver is installed or it sees no
device.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from . import __version__
from ._context.device import Device
from ._launch.module import Module
from ._launch.program import compile as nvrtc_compile
from ._memory.memory import DeviceBuffer
from ._memory.pinned import PinnedBuffer
from ._runtime._bindings import version_string
from ._runtime._init import driver_version, init
from ._work.stream import Stream
from .errors import CudaError, DriverNotFoundError, NoDeviceError

__all__ = [
    "EXIT_FAILED",
    "EXIT_NO_DRIVER",
    "EXIT_OK",
    "EXIT_USAGE",
    "SOURCE",
    "Check",
    "Runner",
    "build_parser",
    "format_line",
    "main",
]

# The exit statuses of every ``python -m cudriver`` command (re-exported there).
#: Success.
EXIT_OK = 0
#: A check failed: a self-test check, or a CUDA error.
EXIT_FAILED = 1
#: A usage error: argparse's own status.
EXIT_USAGE = 2
#: No NVIDIA driver, or a driver that sees no CUDA device.
EXIT_NO_DRIVER = 3

#: The kernels the self-test compiles.
SOURCE = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

extern "C" __global__ void add(float* y, float v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] += v;
    }
}
"""

N = 4096
BLOCK = 256
REPLAYS = 3
FLAG_VALUE = 7
#: How long a check waits for its stream before it fails instead of hanging.
TIMEOUT_S = 30.0


@dataclass
class Check:
    """The outcome of one check."""

    name: str
    passed: bool
    ms: float
    detail: str = ""


def format_line(check: Check) -> str:
    """``PASS  name  1.23 ms  detail``: one line of the report."""
    status = "PASS" if check.passed else "FAIL"
    line = f"{status}  {check.name:<24} {check.ms:9.2f} ms"
    return f"{line}  {check.detail}" if check.detail else line


@dataclass
class Runner:
    """Runs checks in order, prints a line for each, and remembers the outcomes.

    A check is a callable returning a detail string (or None); it fails by raising.
    A check whose prerequisite failed is reported as failed without running.
    """

    out: TextIO = field(default_factory=lambda: sys.stdout)
    results: list[Check] = field(default_factory=list)

    def passed(self, name: str) -> bool:
        """Whether the check ``name`` ran and passed."""
        return any(c.name == name and c.passed for c in self.results)

    def run(self, name: str, fn: Callable[[], str | None], needs: Sequence[str] = ()) -> bool:
        """Run ``fn`` as check ``name`` unless one of ``needs`` did not pass."""
        missing = [n for n in needs if not self.passed(n)]
        if missing:
            check = Check(name, False, 0.0, f"not run: {', '.join(missing)} failed")
        else:
            t0 = time.perf_counter()
            try:
                detail = fn()
            except Exception as exc:
                ms = (time.perf_counter() - t0) * 1e3
                text = str(exc).strip().splitlines()
                msg = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
                check = Check(name, False, ms, msg)
            else:
                ms = (time.perf_counter() - t0) * 1e3
                check = Check(name, True, ms, detail or "")
        self.results.append(check)
        print(format_line(check), file=self.out, flush=True)
        return check.passed

    @property
    def ok(self) -> bool:
        """Whether at least one check ran and every check passed."""
        return bool(self.results) and all(c.passed for c in self.results)

    def summary(self) -> str:
        """``selftest: 9 passed, 0 failed``."""
        good = sum(c.passed for c in self.results)
        return f"selftest: {good} passed, {len(self.results) - good} failed"


def _wait(stream: Any, timeout: float = TIMEOUT_S) -> None:
    """Wait for ``stream`` without hanging forever, then synchronise it.

    Polls ``query()`` so that a stuck stream (e.g. a memory wait never satisfied)
    fails the check after ``timeout`` seconds; the final ``synchronize()`` re-raises
    any host-function error.
    """
    deadline = time.monotonic() + timeout
    while not stream.query():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the stream did not complete within {timeout:g} s")
        time.sleep(0.0005)
    stream.synchronize()


def _close_quietly(objs: Iterable[Any]) -> None:
    """Close each object, ignoring failures: teardown must reach every object."""
    for obj in objs:
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:
            pass


def _ordinal(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a device ordinal, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"a device ordinal is >= 0, not {v}")
    return v


class _Selftest:
    """The checks, sharing the objects they make; :meth:`close` releases them."""

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.objs: list[Any] = []
        self.counter = 0
        self.seen: list[int] = []
        self.replays_done = 0

    def _own(self, obj: Any) -> Any:
        self.objs.append(obj)
        return obj

    def driver(self) -> str:

        self.device = Device(self.ordinal)
        self.ctx = self._own(self.device.primary_context())
        self.ctx.set_current()
        self.stream = self._own(Stream(context=self.ctx))
        major, minor = driver_version()
        return (
            f"{self.device.name} ({self.device.compute_capability.arch}), CUDA driver "
            f"{major}.{minor}, cuda-bindings {version_string()}, cudriver {__version__}"
        )

    def compile(self) -> str:

        cc = self.device.compute_capability
        image = nvrtc_compile(SOURCE, name="selftest.cu", arch=cc, target="cubin")
        self.module = self._own(Module.load(image, context=self.ctx))
        self.saxpy = self.module.kernel("saxpy")
        self.add = self.module.kernel("add")
        return f"{cc.arch} cubin, {len(image):,} bytes, kernels saxpy and add"

    def _grid(self) -> int:
        return (N + BLOCK - 1) // BLOCK

    def kernel(self) -> str:

        rng = np.random.default_rng(1)
        x = rng.standard_normal(N).astype(np.float32)
        y = rng.standard_normal(N).astype(np.float32)
        a = np.float32(2.5)
        dx = self._own(DeviceBuffer.from_array(x))
        dy = self._own(DeviceBuffer.from_array(y))
        self.saxpy.launch(self.stream, self._grid(), BLOCK, a, dx, dy, N)
        _wait(self.stream)
        got = dy.copy_to(np.empty_like(y))
        want = a * x + y
        err = float(np.max(np.abs(got - want)))
        if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise AssertionError(f"saxpy differs from numpy: max abs error {err:.3g}")
        return f"saxpy on {N:,} floats matches numpy (max abs error {err:.2g})"

    def prepared(self) -> str:

        y0 = np.arange(N, dtype=np.float32)
        dy = self._own(DeviceBuffer.from_array(y0))
        plan = self.add.prepare(self._grid(), BLOCK, dy, 1.5, N)
        for _ in range(2):
            plan.launch(self.stream)
        _wait(self.stream)
        got = dy.copy_to(np.empty_like(y0))
        if not np.array_equal(got, y0 + np.float32(3.0)):
            raise AssertionError("two prepared launches of add(1.5) did not add 3.0")
        return "prepared add launched twice, values right"

    def capture(self) -> str:

        self.y0 = np.arange(N, dtype=np.float32)
        self.dy = self._own(DeviceBuffer.from_array(self.y0))
        self.pin = self._own(PinnedBuffer(64, mapped=True))
        self.flags = self.pin.array(np.uint32)
        self.flags[:] = 0
        flags = self.flags

        def host(tag: str) -> None:
            # Runs on the driver's thread once per replay, after the memory ops.
            if tag != "replay":
                raise AssertionError(f"host function got {tag!r}")
            self.counter += 1
            self.seen.append(int(flags[0]))

        s = self.stream
        grid = self._grid()
        with s.capture() as g:
            self.add.launch(s, grid, BLOCK, self.dy, 1.0, N)
            s.write_value32(self.pin, FLAG_VALUE)
            s.wait_value32(self.pin, FLAG_VALUE)
            s.launch_host_func(host, "replay")
            self.add.launch(s, grid, BLOCK, self.dy, 2.0, N)
            s.write_value32((self.pin, 4), FLAG_VALUE + 1)
        self.graph = self._own(g)
        nodes = g.num_nodes
        if nodes < 4:
            raise AssertionError(f"the captured graph has {nodes} nodes, expected at least 4")
        self.exe = self._own(g.instantiate())
        if self.counter != 0:
            raise AssertionError("the host function ran during capture")
        return f"{nodes} nodes: 2 kernels, a host function, 3 memory operations"

    def replay(self) -> str:
        for i in range(REPLAYS):
            self.flags[0] = 0
            self.flags[1] = 0
            self.exe.launch(self.stream)
            _wait(self.stream)
            self.replays_done += 1
            if int(self.flags[0]) != FLAG_VALUE or int(self.flags[1]) != FLAG_VALUE + 1:
                raise AssertionError(
                    f"replay {i + 1}: the memory writes left {int(self.flags[0])}, "
                    f"{int(self.flags[1])}, expected {FLAG_VALUE}, {FLAG_VALUE + 1}"
                )
        return f"{REPLAYS} replays completed"

    def host_function(self) -> str:
        if self.counter != REPLAYS:
            raise AssertionError(f"the host function ran {self.counter} times in {REPLAYS} replays")
        return f"counter == {self.counter}"

    def memops(self) -> str:
        want = [FLAG_VALUE] * REPLAYS
        if self.seen != want:
            raise AssertionError(
                f"the host function saw flag values {self.seen}, expected {want} (the "
                "write must land before the wait and the host function)"
            )
        return f"write_value32 landed before the host function in every replay: {self.seen}"

    def graph_kernels(self) -> str:

        got = self.dy.copy_to(np.empty_like(self.y0))
        want = self.y0 + np.float32(3.0 * REPLAYS)
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            raise AssertionError(f"{bad} of {N} values wrong after {REPLAYS} replays")
        return f"y == y0 + {3 * REPLAYS} after {REPLAYS} replays"

    def close(self) -> None:
        stream = getattr(self, "stream", None)
        if stream is not None:
            try:
                _wait(stream, 5.0)
            except Exception:
                pass
        _close_quietly(reversed(self.objs))
        self.objs.clear()


def build_parser() -> argparse.ArgumentParser:
    """The ``selftest`` command's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m cudriver selftest",
        description="End-to-end check on a GPU: NVRTC, kernels, graphs with host "
        "functions and memory operations.",
        epilog="exit statuses: 0 every check passed, 1 a check failed (or a CUDA error), "
        "2 usage error, 3 no NVIDIA driver or no CUDA device",
    )
    p.add_argument("--device", metavar="N", type=_ordinal, default=0, help="device ordinal")
    return p


def report_error(exc: CudaError) -> int:
    """Print ``exc`` for the command line; return the exit status it means.

    No driver or no device: :data:`EXIT_NO_DRIVER`; any other CUDA error:
    :data:`EXIT_FAILED`.
    """
    print(f"cudriver: {exc}", file=sys.stderr)
    if isinstance(exc, (DriverNotFoundError, NoDeviceError)):
        return EXIT_NO_DRIVER
    return EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the self-test; returns 0 when all checks passed, 1 if not, 3 without a driver.

    A usage error exits with 2 (argparse's ``SystemExit``), and no device (the driver
    sees none) returns 3, as no driver does.
    """
    args = build_parser().parse_args(argv)
    try:
        init()
        if Device.count() == 0:
            print("cudriver: the CUDA driver sees no device", file=sys.stderr)
            return EXIT_NO_DRIVER
    except CudaError as exc:
        return report_error(exc)
    t = _Selftest(args.device)
    r = Runner()
    try:
        r.run("driver", t.driver)
        r.run("compile (NVRTC)", t.compile, needs=["driver"])
        r.run("kernel vs numpy", t.kernel, needs=["compile (NVRTC)"])
        r.run("prepared launch", t.prepared, needs=["compile (NVRTC)"])
        r.run("graph capture", t.capture, needs=["compile (NVRTC)"])
        r.run("graph replay x3", t.replay, needs=["graph capture"])
        r.run("host function", t.host_function, needs=["graph replay x3"])
        r.run("memory operations", t.memops, needs=["graph replay x3"])
        r.run("graph kernels", t.graph_kernels, needs=["graph replay x3"])
    finally:
        t.close()
    print(r.summary())
    return EXIT_OK if r.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
