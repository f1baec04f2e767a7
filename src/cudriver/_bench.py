"""Host overhead of cudriver against raw ``cuda.bindings``, ``cuda.core`` and CuPy.

``python -m cudriver bench`` measures, in one process, on one device and in its
primary context, how much host time each layer spends per call on the hot paths
(stream query, event record, kernel and graph launches, host functions, stream
memory operations, allocation) and prints a table with the ratio of cudriver to
hand-written raw ``cuda.bindings.driver`` calls and the targets the project set.

Every number is the median of several repeats; each repeat times many calls in a
row with :func:`time.perf_counter_ns` after a warm-up, with the garbage collector
off. A peer that is not installed, or lacks an operation, shows ``n/a``; one that
fails on an operation shows ``error`` and the message is printed under the table,
while the other measurements go on.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import json
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "KERNEL_SOURCE",
    "OPS",
    "OP_NAMES",
    "PEERS",
    "PEER_TITLES",
    "RATIO_TARGET",
    "Op",
    "Cell",
    "Row",
    "Target",
    "Bench",
    "Unavailable",
    "build_parser",
    "parse_args",
    "calls_for",
    "measure",
    "evaluate_targets",
    "format_table",
    "to_json",
    "run_benchmarks",
    "main",
]

#: The one kernel source every layer compiles for the current device.
KERNEL_SOURCE = r"""
extern "C" __global__ void empty() {}

extern "C" __global__ void axpy3(float a, float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = a * x[i] + 1.0f;
    }
}
"""

#: Elements of the buffer that ``axpy3`` works on, and its block size (one block).
N_X = 32
ALLOC_BYTES = 1 << 20
MEMOP_BYTES = 4096
KERNELS_PER_BATCH = 100

#: cudriver may take at most this many times the raw bindings' host time.
RATIO_TARGET = 1.10
HOST_FUNC_FRACTION = 0.5
GRAPH_SPEEDUP = 5.0

PEERS = ("cudriver", "raw", "cuda.core", "cupy")
PEER_TITLES = {"cudriver": "cudriver", "raw": "raw", "cuda.core": "cuda.core", "cupy": "CuPy"}


@dataclass(frozen=True)
class Op:
    """One measured operation.

    Attributes
    ----------
    name
        The key used by ``--only`` and in the JSON output.
    label
        The text in the table.
    unit
        ``"ns"`` (host time per call) or ``"us"`` (wall time per batch to completion).
    calls
        Calls (or batches) per repeat at full size; ``--quick`` takes a tenth.
    single_call
        The operation maps to one driver call (two for alloc+free), so the
        cudriver/raw ratio target applies.
    """

    name: str
    label: str
    unit: str
    calls: int
    single_call: bool


OPS: tuple[Op, ...] = (
    Op("stream_query", "stream query (idle)", "ns", 20_000, True),
    Op("event_record", "event record", "ns", 20_000, True),
    Op("launch_empty", "launch, no arguments", "ns", 10_000, True),
    Op("launch_args", "launch, 3 arguments", "ns", 10_000, True),
    Op("launch_prepared", "launch, 3 arguments, prepared", "ns", 10_000, True),
    Op("graph_launch", "graph launch (1 node)", "ns", 10_000, True),
    Op("eager_100", "100 kernels, eager, to completion", "us", 200, False),
    Op("graph_100", "100 kernels, one graph, to completion", "us", 200, False),
    Op("host_func_enqueue", "host function, enqueue", "ns", 2_000, False),
    Op("host_func_latency", "host function, enqueue to running", "ns", 500, False),
    Op("write_value32", "write_value32", "ns", 10_000, True),
    Op("wait_value32", "wait_value32 (already satisfied)", "ns", 10_000, True),
    Op("alloc_free", "DeviceBuffer alloc+free", "ns", 1_000, True),
    Op("alloc_free_async", "DeviceBuffer alloc+free, stream-ordered", "ns", 2_000, True),
)
OP_NAMES: tuple[str, ...] = tuple(op.name for op in OPS)
_OPS_BY_NAME = {op.name: op for op in OPS}

DEFAULT_REPEATS = 7
QUICK_REPEATS = 3
QUICK_DIVISOR = 10


class Unavailable(Exception):
    """The peer is not installed or has no such operation (shown as ``n/a``)."""


@dataclass
class Bench:
    """A prepared measurement.

    Attributes
    ----------
    run
        ``run(n)`` performs ``n`` calls (or batches) and returns the row's value:
        nanoseconds per call, or microseconds per batch.
    sync
        Waits for the peer's stream; called after every repeat, outside the timing.
    note
        How the peer does the operation, when it is worth saying.
    """

    run: Callable[[int], float]
    sync: Callable[[], None]
    note: str = ""


@dataclass
class Cell:
    """One peer's result for one operation."""

    status: str = "ok"  # "ok", "n/a" or "error"
    value: float | None = None
    samples: list[float] = field(default_factory=list)
    note: str = ""


@dataclass(frozen=True)
class Target:
    """A target and whether it was met: ``result`` is ``"PASS"``, ``"MISS"`` or ``"n/a"``."""

    text: str
    result: str


@dataclass
class Row:
    """One operation's results over all peers."""

    op: Op
    cells: dict[str, Cell] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)

    def value(self, peer: str) -> float | None:
        """The peer's median, or None when it has none."""
        c = self.cells.get(peer)
        if c is None or c.status != "ok":
            return None
        return c.value

    @property
    def ratio(self) -> float | None:
        """The ratio of cudriver's value to the raw bindings' value."""
        a, b = self.value("cudriver"), self.value("raw")
        if a is None or b is None or b <= 0:
            return None
        return a / b


# -- command line ----------------------------------------------------------------------------


def _only(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("--only needs at least one operation name")
    unknown = [n for n in names if n not in _OPS_BY_NAME]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown operation {', '.join(unknown)}; choose from {', '.join(OP_NAMES)}"
        )
    return names


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _ordinal(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a device ordinal, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"a device ordinal is >= 0, not {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The ``bench`` command's argument parser."""
    p = argparse.ArgumentParser(
        prog="python -m cudriver bench",
        description=(
            "Host overhead per call of cudriver, raw cuda.bindings, cuda.core and CuPy, "
            "measured in one process on one device."
        ),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"a tenth of the calls and {QUICK_REPEATS} repeats (a smoke run)",
    )
    p.add_argument("--json", metavar="PATH", help="also write the environment and rows as JSON")
    p.add_argument(
        "--only",
        metavar="NAME,...",
        type=_only,
        help="measure only these operations (see --list)",
    )
    p.add_argument(
        "--repeats",
        metavar="N",
        type=_positive,
        help=f"repeats per measurement; the median is reported (default {DEFAULT_REPEATS}, "
        f"{QUICK_REPEATS} with --quick)",
    )
    p.add_argument("--device", metavar="N", type=_ordinal, default=0, help="device ordinal")
    p.add_argument("--list", action="store_true", help="list the operation names and exit")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit with status 1 when a target is missed or a cudriver measurement failed",
    )
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse ``argv``; exits with status 2 on a usage error, as argparse does."""
    args = build_parser().parse_args(argv)
    if args.repeats is None:
        args.repeats = QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    if args.only is None:
        args.only = OP_NAMES
    return args


def calls_for(op: Op, quick: bool) -> int:
    """Calls (or batches) per repeat for ``op``."""
    return max(1, op.calls // QUICK_DIVISOR) if quick else op.calls


# -- timing ----------------------------------------------------------------------------------


#: Calls timed between two synchronisations: the driver's launch queue must never
#: fill, or the loop would time the GPU's throughput instead of the host's cost.
CHUNK = 250


def measure(
    bench: Bench, n: int, repeats: int, warmup: int | None = None
) -> tuple[float, list[float]]:
    """Warm up, then time ``repeats`` runs of ``n`` calls; return the median and samples.

    Each run is timed in chunks of at most :data:`CHUNK` calls with the stream
    synchronised between chunks, outside the timing; the garbage collector is off
    while a chunk runs (and restored after it).
    """
    if n < 1 or repeats < 1:
        raise ValueError("n and repeats must be >= 1")
    warm_up(bench, n, warmup)
    samples = [one_repeat(bench, n) for _ in range(repeats)]
    return float(statistics.median(samples)), samples


def warm_up(bench: Bench, n: int, warmup: int | None = None) -> None:
    """Run a tenth of ``n`` calls (or ``warmup``) untimed, then synchronise."""
    w = max(1, n // 10) if warmup is None else warmup
    if w:
        bench.run(w)
        bench.sync()
    gc.collect()


def one_repeat(bench: Bench, n: int) -> float:
    """Time ``n`` calls in chunks of at most :data:`CHUNK`; the value per call."""
    total = 0.0
    left = n
    while left:
        k = min(left, CHUNK)
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            v = bench.run(k)
        finally:
            if was_enabled:
                gc.enable()
        bench.sync()
        total += float(v) * k
        left -= k
    return total / n


_clock = time.perf_counter_ns


def _per_call(
    f: Callable[..., Any], args: tuple[Any, ...], check: Callable[[Any], None] | None = None
) -> Callable[[int], float]:
    """``run(n)``: ``n`` calls of ``f(*args)`` in a tight loop; ns per call."""

    def run(n: int) -> float:
        rng = range(n)
        r: Any = None
        t0 = _clock()
        for _ in rng:
            r = f(*args)
        dt = _clock() - t0
        if check is not None:
            check(r)
        return dt / n

    return run


def _per_call_raw(
    f: Callable[..., Any], args: tuple[Any, ...], ok: Any, name: str
) -> Callable[[int], float]:
    """``run(n)``: ``n`` raw calls, each status checked the way correct raw code must."""

    def run(n: int) -> float:
        rng = range(n)
        t0 = _clock()
        for _ in rng:
            r = f(*args)
            if r[0] is not ok:
                raise RuntimeError(f"{name} returned {r[0]!r}")
        return (_clock() - t0) / n

    return run


def _per_batch(body: Callable[[], None], sync: Callable[[], None]) -> Callable[[int], float]:
    """``run(n)``: ``n`` times ``body(); sync()``; mean wall time per batch in µs."""

    def run(n: int) -> float:
        total = 0
        for _ in range(n):
            t0 = _clock()
            body()
            sync()
            total += _clock() - t0
        return total / n / 1000.0

    return run


def _latency(
    enqueue: Callable[[], None], sync: Callable[[], None], stamps: list[int]
) -> Callable[[int], float]:
    """``run(n)``: median ns from before the enqueue to the callable's own clock reading."""

    def run(n: int) -> float:
        out: list[int] = []
        for _ in range(n):
            stamps.clear()
            t0 = _clock()
            enqueue()
            sync()
            if not stamps:
                raise RuntimeError("the host function did not run before the stream completed")
            out.append(stamps[0] - t0)
        return float(statistics.median(out))

    return run


def close_quietly(objs: Iterable[Any]) -> None:
    """Close each object, ignoring failures: teardown must reach every object."""
    for obj in objs:
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:
            pass


def _noop(*args: Any) -> None:
    return None


# -- peers -----------------------------------------------------------------------------------


class _Peer:
    """A layer under test; ``op_<name>()`` returns a :class:`Bench` or raises Unavailable."""

    name = ""
    version: str | None = None
    #: The context the peer works in (an int handle), read after setup.
    context: int | None = None

    def setup(self) -> None:
        raise NotImplementedError

    def bench(self, op: str) -> Bench:
        fn = getattr(self, f"op_{op}", None)
        if fn is None:
            raise Unavailable(f"{PEER_TITLES[self.name]} has no such operation")
        b: Bench = fn()
        return b

    def recover(self) -> None:
        """Try to leave the peer usable after a failed measurement."""

    def close(self) -> None:
        """Release what :meth:`setup` and the operations made (best effort)."""


class _CudriverPeer(_Peer):
    name = "cudriver"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._mod: Any = None
        self._x: Any = None
        self._keep: list[Any] = []

    def setup(self) -> None:
        from . import __version__
        from .device import Device
        from .stream import Stream

        self.version = __version__
        self.device = Device(self.ordinal)
        self.ctx = self.device.primary_context()
        self.ctx.set_current()
        self.stream = Stream(context=self.ctx)
        self.context = int(self.ctx)

    def make_current(self) -> None:
        self.ctx.set_current()

    def sync(self) -> None:
        self.stream.synchronize()

    def _module(self) -> Any:
        if self._mod is None:
            from .module import Module
            from .program import compile as nvrtc_compile

            cc = self.device.compute_capability
            image = nvrtc_compile(KERNEL_SOURCE, name="bench.cu", arch=cc, target="cubin")
            self._mod = Module.load(image, context=self.ctx)
        return self._mod

    def _buffer(self) -> Any:
        if self._x is None:
            from .memory import DeviceBuffer

            self._x = DeviceBuffer(N_X * 4)
            self._x.fill(0)
        return self._x

    def op_stream_query(self) -> Bench:
        return Bench(_per_call(self.stream.query, ()), self.sync)

    def op_event_record(self) -> Bench:
        from .event import Event

        ev = Event(timing=False, context=self.ctx)
        self._keep.append(ev)
        return Bench(_per_call(ev.record, (self.stream,)), self.sync)

    def op_launch_empty(self) -> Bench:
        k = self._module().kernel("empty")
        return Bench(_per_call(k.launch, (self.stream, 1, 1)), self.sync)

    def op_launch_args(self) -> Bench:
        k = self._module().kernel("axpy3")
        args = (self.stream, 1, N_X, 2.0, self._buffer(), N_X)
        return Bench(_per_call(k.launch, args), self.sync, "Python float and int arguments")

    def op_launch_prepared(self) -> Bench:
        k = self._module().kernel("axpy3")
        plan = k.prepare(1, N_X, 2.0, self._buffer(), N_X)
        self._keep.append(plan)
        return Bench(_per_call(plan.launch, (self.stream,)), self.sync, "Kernel.prepare")

    def _graph(self, count: int) -> Any:
        k = self._module().kernel("empty")
        s = self.stream
        # One eager launch first: the kernel's first use (parameter info) stays
        # outside the capture.
        k.launch(s, 1, 1)
        s.synchronize()
        with s.capture() as g:
            for _ in range(count):
                k.launch(s, 1, 1)
        exe = g.instantiate()
        self._keep.extend((g, exe))
        return exe

    def op_graph_launch(self) -> Bench:
        exe = self._graph(1)
        return Bench(_per_call(exe.launch, (self.stream,)), self.sync)

    def op_eager_100(self) -> Bench:
        launch = self._module().kernel("empty").launch
        s = self.stream

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(s, 1, 1)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        exe = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            exe.launch(s)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        return Bench(_per_call(self.stream.launch_host_func, (_noop,)), self.sync)

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []
        launch = self.stream.launch_host_func

        def stamp() -> None:
            stamps.append(_clock())

        def enqueue() -> None:
            launch(stamp)

        return Bench(_latency(enqueue, self.sync, stamps), self.sync)

    def _flag(self) -> Any:
        from .memory import DeviceBuffer

        buf = DeviceBuffer(MEMOP_BYTES)
        buf.fill(1)  # every word 0x01010101: a wait for >= 1 is already satisfied
        self.sync()
        self._keep.append(buf)
        return buf

    def op_write_value32(self) -> Bench:
        buf = self._flag()
        return Bench(
            _per_call(self.stream.write_value32, (buf, 1)), self.sync, "address: a DeviceBuffer"
        )

    def op_wait_value32(self) -> Bench:
        buf = self._flag()
        self.stream.write_value32(buf, 1)
        self.sync()
        return Bench(
            _per_call(self.stream.wait_value32, (buf, 1)), self.sync, "address: a DeviceBuffer"
        )

    def op_alloc_free(self) -> Bench:
        from .memory import DeviceBuffer

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                DeviceBuffer(ALLOC_BYTES).close()
            return (_clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, DeviceBuffer(n).close()")

    def op_alloc_free_async(self) -> Bench:
        from .memory import DeviceBuffer

        s = self.stream

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                DeviceBuffer(ALLOC_BYTES, stream=s).close()
            return (_clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, DeviceBuffer(n, stream=s).close()")

    def recover(self) -> None:
        try:
            if self.stream.is_capturing:
                self.stream._abort_capture()
            self.stream.synchronize()
        except Exception:
            pass

    def close(self) -> None:
        close_quietly(reversed(self._keep))
        self._keep.clear()
        close_quietly((self._x, self._mod, getattr(self, "stream", None)))


class _RawPeer(_Peer):
    """Hand-written ``cuda.bindings.driver`` calls, the way a user writes them."""

    name = "raw"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._mod: Any = None
        self._fns: dict[str, Any] = {}
        self._x: Any = None
        self._allocs: list[Any] = []
        self._graphs: list[tuple[Any, Any]] = []
        self._events: list[Any] = []
        self._keep: list[Any] = []

    def _ok(self, r: Any, name: str) -> Any:
        if r[0] != self.SUCCESS:
            raise RuntimeError(f"{name} returned {r[0]!r}")
        return r[1] if len(r) == 2 else r[1:]

    def setup(self) -> None:
        from cuda.bindings import driver as drv

        from ._bindings import version_string

        self.drv = drv
        self.version = version_string()
        self.SUCCESS = drv.CUresult.CUDA_SUCCESS
        self._ok(drv.cuInit(0), "cuInit")
        self.dev = self._ok(drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        self.ctx = self._ok(drv.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self._ok(drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        flags = int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.h = self._ok(drv.cuStreamCreate(flags), "cuStreamCreate")
        self.context = int(self.ctx)

    def sync(self) -> None:
        self._ok(self.drv.cuStreamSynchronize(self.h), "cuStreamSynchronize")

    def _compile(self) -> bytes:
        from cuda.bindings import nvrtc

        ok = nvrtc.nvrtcResult.NVRTC_SUCCESS
        r = nvrtc.nvrtcCreateProgram(KERNEL_SOURCE.encode(), b"bench.cu", 0, [], [])
        if r[0] != ok:
            raise RuntimeError(f"nvrtcCreateProgram returned {r[0]!r}")
        prog = r[1]
        try:
            opts = [f"--gpu-architecture={_arch_of(self.ordinal)}".encode()]
            r = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            if r[0] != ok:
                raise RuntimeError(f"nvrtcCompileProgram returned {r[0]!r}")
            r = nvrtc.nvrtcGetCUBINSize(prog)
            if r[0] != ok:
                raise RuntimeError(f"nvrtcGetCUBINSize returned {r[0]!r}")
            image = bytes(int(r[1]))
            r = nvrtc.nvrtcGetCUBIN(prog, image)
            if r[0] != ok:
                raise RuntimeError(f"nvrtcGetCUBIN returned {r[0]!r}")
            return image
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    def _fn(self, name: str) -> Any:
        f = self._fns.get(name)
        if f is None:
            if self._mod is None:
                # A NUL-terminated copy, passed by address, as for any image.
                buf = ctypes.create_string_buffer(self._compile())
                self._keep.append(buf)
                self._mod = self._ok(
                    self.drv.cuModuleLoadData(ctypes.addressof(buf)), "cuModuleLoadData"
                )
            f = self._ok(
                self.drv.cuModuleGetFunction(self._mod, name.encode()), "cuModuleGetFunction"
            )
            self._fns[name] = f
        return f

    def _alloc(self, nbytes: int) -> Any:
        p = self._ok(self.drv.cuMemAlloc(nbytes), "cuMemAlloc")
        self._allocs.append(p)
        return p

    def _buffer(self) -> Any:
        if self._x is None:
            self._x = self._alloc(N_X * 4)
            self._ok(self.drv.cuMemsetD32(self._x, 0, N_X), "cuMemsetD32")
        return self._x

    def op_stream_query(self) -> Bench:
        d = self.drv
        return Bench(
            _per_call_raw(d.cuStreamQuery, (self.h,), self.SUCCESS, "cuStreamQuery"), self.sync
        )

    def op_event_record(self) -> Bench:
        d = self.drv
        flags = int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        ev = self._ok(d.cuEventCreate(flags), "cuEventCreate")
        self._events.append(ev)
        return Bench(
            _per_call_raw(d.cuEventRecord, (ev, self.h), self.SUCCESS, "cuEventRecord"), self.sync
        )

    def _launch_args(self, name: str, block: int, params: Any) -> tuple[Any, ...]:
        return (self._fn(name), 1, 1, 1, block, 1, 1, 0, self.h, params, 0)

    def op_launch_empty(self) -> Bench:
        args = self._launch_args("empty", 1, 0)
        return Bench(
            _per_call_raw(self.drv.cuLaunchKernel, args, self.SUCCESS, "cuLaunchKernel"), self.sync
        )

    def op_launch_args(self) -> Bench:
        x = int(self._buffer())
        params = ((2.0, x, N_X), (ctypes.c_float, ctypes.c_void_p, ctypes.c_int))
        args = self._launch_args("axpy3", N_X, params)
        return Bench(
            _per_call_raw(self.drv.cuLaunchKernel, args, self.SUCCESS, "cuLaunchKernel"),
            self.sync,
            "kernelParams as ((values), (ctypes types)), packed on every call",
        )

    def op_launch_prepared(self) -> Bench:
        a = ctypes.c_float(2.0)
        p = ctypes.c_void_p(int(self._buffer()))
        n = ctypes.c_int(N_X)
        arr = (ctypes.c_void_p * 3)(ctypes.addressof(a), ctypes.addressof(p), ctypes.addressof(n))
        self._keep.extend((a, p, n, arr))
        args = self._launch_args("axpy3", N_X, ctypes.addressof(arr))
        return Bench(
            _per_call_raw(self.drv.cuLaunchKernel, args, self.SUCCESS, "cuLaunchKernel"),
            self.sync,
            "kernelParams as the int address of a pre-packed ctypes void*[3]",
        )

    def _graph(self, count: int) -> Any:
        d = self.drv
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        args = self._launch_args("empty", 1, 0)
        self._ok(d.cuStreamBeginCapture(self.h, mode), "cuStreamBeginCapture")
        try:
            for _ in range(count):
                self._ok(d.cuLaunchKernel(*args), "cuLaunchKernel")
        finally:
            r = d.cuStreamEndCapture(self.h)
        g = self._ok(r, "cuStreamEndCapture")
        exe = self._ok(d.cuGraphInstantiate(g, 0), "cuGraphInstantiate")
        self._graphs.append((g, exe))
        return exe

    def op_graph_launch(self) -> Bench:
        exe = self._graph(1)
        return Bench(
            _per_call_raw(self.drv.cuGraphLaunch, (exe, self.h), self.SUCCESS, "cuGraphLaunch"),
            self.sync,
        )

    def op_eager_100(self) -> Bench:
        launch = self.drv.cuLaunchKernel
        args = self._launch_args("empty", 1, 0)

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(*args)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        exe = self._graph(KERNELS_PER_BATCH)
        launch, h = self.drv.cuGraphLaunch, self.h

        def body() -> None:
            launch(exe, h)

        return Bench(_per_batch(body, self.sync), self.sync)

    def _host_fn(self, py: Callable[[Any], None]) -> Any:
        tramp = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(py)
        self._keep.append(tramp)  # the driver calls it later: keep it alive
        addr = ctypes.cast(tramp, ctypes.c_void_p).value
        return self.drv.CUhostFn(addr)

    _HOST_NOTE = (
        "bindings' cuLaunchHostFunc with a ctypes CFUNCTYPE trampoline, eager only "
        "(unsafe to capture)"
    )

    def op_host_func_enqueue(self) -> Bench:
        fn = self._host_fn(_noop)
        return Bench(
            _per_call_raw(
                self.drv.cuLaunchHostFunc, (self.h, fn, 0), self.SUCCESS, "cuLaunchHostFunc"
            ),
            self.sync,
            self._HOST_NOTE,
        )

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []

        def stamp(_p: Any) -> None:
            stamps.append(_clock())

        fn = self._host_fn(stamp)
        launch, h = self.drv.cuLaunchHostFunc, self.h

        def enqueue() -> None:
            launch(h, fn, 0)

        return Bench(_latency(enqueue, self.sync, stamps), self.sync, self._HOST_NOTE)

    def _flag(self) -> Any:
        p = self._alloc(MEMOP_BYTES)
        self._ok(self.drv.cuMemsetD32(p, 1, MEMOP_BYTES // 4), "cuMemsetD32")
        self._ok(self.drv.cuCtxSynchronize(), "cuCtxSynchronize")
        return p

    def op_write_value32(self) -> Bench:
        p = self._flag()
        return Bench(
            _per_call_raw(
                self.drv.cuStreamWriteValue32,
                (self.h, p, 1, 0),
                self.SUCCESS,
                "cuStreamWriteValue32",
            ),
            self.sync,
        )

    def op_wait_value32(self) -> Bench:
        d = self.drv
        p = self._flag()
        geq = int(d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        return Bench(
            _per_call_raw(
                d.cuStreamWaitValue32, (self.h, p, 1, geq), self.SUCCESS, "cuStreamWaitValue32"
            ),
            self.sync,
        )

    def op_alloc_free(self) -> Bench:
        alloc, free = self.drv.cuMemAlloc, self.drv.cuMemFree
        ok = self.SUCCESS

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES)
                free(r[1])
            dt = _clock() - t0
            if r[0] != ok:
                raise RuntimeError(f"cuMemAlloc returned {r[0]!r}")
            return dt / n

        return Bench(run, self.sync, "1 MiB, cuMemAlloc + cuMemFree")

    def op_alloc_free_async(self) -> Bench:
        alloc, free = self.drv.cuMemAllocAsync, self.drv.cuMemFreeAsync
        h, ok = self.h, self.SUCCESS

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES, h)
                free(r[1], h)
            dt = _clock() - t0
            if r[0] != ok:
                raise RuntimeError(f"cuMemAllocAsync returned {r[0]!r}")
            return dt / n

        return Bench(run, self.sync, "1 MiB, cuMemAllocAsync + cuMemFreeAsync")

    def recover(self) -> None:
        d = self.drv
        try:
            st = d.cuStreamIsCapturing(self.h)
            if st[0] == self.SUCCESS and int(st[1]) != 0:
                r = d.cuStreamEndCapture(self.h)
                if r[0] == self.SUCCESS and r[1] is not None:
                    d.cuGraphDestroy(r[1])
            d.cuStreamSynchronize(self.h)
        except Exception:
            pass

    def close(self) -> None:
        d = getattr(self, "drv", None)
        if d is None:
            return
        try:
            d.cuCtxSynchronize()
            for g, exe in self._graphs:
                d.cuGraphExecDestroy(exe)
                d.cuGraphDestroy(g)
            for ev in self._events:
                d.cuEventDestroy(ev)
            for p in self._allocs:
                d.cuMemFree(p)
            if self._mod is not None:
                d.cuModuleUnload(self._mod)
            d.cuStreamDestroy(self.h)
            d.cuDevicePrimaryCtxRelease(self.dev)
        except Exception:
            pass
        self._graphs.clear()
        self._events.clear()
        self._allocs.clear()
        self._keep.clear()


def _import_cuda_core() -> Any:
    """``cuda.core`` 1.x, else ``cuda.core.experimental`` (0.x); Unavailable if neither."""
    try:
        import cuda.core as cc

        if hasattr(cc, "Device") and hasattr(cc, "launch"):
            return cc
    except ImportError:
        pass
    try:
        import cuda.core.experimental as ccx
    except ImportError:
        raise Unavailable("cuda.core is not installed") from None
    return ccx


def _dist_version(*names: str) -> str | None:
    from importlib import metadata

    for n in names:
        try:
            return metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return None


class _CudaCorePeer(_Peer):
    name = "cuda.core"

    def __init__(self, ordinal: int, arch: Callable[[], str]) -> None:
        self.ordinal = ordinal
        self._arch = arch
        self._obj: Any = None
        self._x: Any = None
        self._keep: list[Any] = []

    def setup(self) -> None:
        import numpy as np

        cc = _import_cuda_core()
        self.cc = cc
        self.np = np
        self.version = _dist_version("cuda-core", "cuda_core") or str(
            getattr(cc, "__version__", "unknown")
        )
        if cc.__name__.endswith("experimental"):
            self.version = f"{self.version} (cuda.core.experimental)"
        self.dev = cc.Device(self.ordinal)
        self.dev.set_current()
        self.stream = self.dev.create_stream()
        self.context = _current_context_int()

    def sync(self) -> None:
        self.stream.sync()

    def _kernel(self, name: str) -> Any:
        if self._obj is None:
            cc = self.cc
            prog = cc.Program(KERNEL_SOURCE, "c++", cc.ProgramOptions(arch=self._arch()))
            self._obj = prog.compile("cubin")
        return self._obj.get_kernel(name)

    def _buffer(self) -> Any:
        if self._x is None:
            self._x = self.dev.allocate(N_X * 4, stream=self.stream)
            self.sync()
        return self._x

    def _config(self, block: int) -> Any:
        return self.cc.LaunchConfig(grid=1, block=block)

    def op_stream_query(self) -> Bench:
        raise Unavailable("cuda.core's Stream has no query (only sync)")

    def op_event_record(self) -> Bench:
        ev = self.stream.record()
        return Bench(_per_call(self.stream.record, (ev,)), self.sync, "stream.record(event)")

    def op_launch_empty(self) -> Bench:
        args = (self.stream, self._config(1), self._kernel("empty"))
        return Bench(_per_call(self.cc.launch, args), self.sync)

    def op_launch_args(self) -> Bench:
        np = self.np
        k = self._kernel("axpy3")
        args = (self.stream, self._config(N_X), k, np.float32(2.0), self._buffer(), np.int32(N_X))
        return Bench(_per_call(self.cc.launch, args), self.sync, "numpy scalars and a Buffer")

    def op_launch_prepared(self) -> Bench:
        raise Unavailable("cuda.core has no prepared launch; its plain launch is the target")

    def _graph(self, count: int) -> Any:
        cfg, k = self._config(1), self._kernel("empty")  # loaded outside the capture
        gb = self.stream.create_graph_builder()
        gb.begin_building()
        for _ in range(count):
            self.cc.launch(gb, cfg, k)
        gb.end_building()
        g = gb.complete()
        self._keep.extend((gb, g))
        return g

    def op_graph_launch(self) -> Bench:
        g = self._graph(1)
        return Bench(_per_call(g.launch, (self.stream,)), self.sync, "create_graph_builder()")

    def op_eager_100(self) -> Bench:
        launch, s, cfg, k = self.cc.launch, self.stream, self._config(1), self._kernel("empty")

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(s, cfg, k)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        g = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            g.launch(s)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        raise Unavailable("cuda.core has host callbacks only inside graphs")

    def op_host_func_latency(self) -> Bench:
        raise Unavailable("cuda.core has host callbacks only inside graphs")

    def op_write_value32(self) -> Bench:
        raise Unavailable("cuda.core has no stream memory operations")

    def op_wait_value32(self) -> Bench:
        raise Unavailable("cuda.core has no stream memory operations")

    def op_alloc_free(self) -> Bench:
        raise Unavailable("cuda.core allocates through stream-ordered memory resources")

    def op_alloc_free_async(self) -> Bench:
        allocate, s = self.dev.allocate, self.stream

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                allocate(ALLOC_BYTES, stream=s).close(s)
            return (_clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, dev.allocate(n, stream=s).close(s)")

    def recover(self) -> None:
        try:
            self.stream.sync()
        except Exception:
            pass

    def close(self) -> None:
        close_quietly(reversed(self._keep))
        self._keep.clear()
        if self._x is not None:
            try:
                self._x.close(self.stream)
            except Exception:
                pass
        s = getattr(self, "stream", None)
        if s is not None:
            try:
                s.sync()
                s.close()
            except Exception:
                pass


class _CupyPeer(_Peer):
    name = "cupy"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._mod: Any = None
        self._x: Any = None
        self._keep: list[Any] = []

    def setup(self) -> None:
        import numpy as np

        try:
            import cupy
        except ImportError:
            raise Unavailable("CuPy is not installed") from None
        self.cp = cupy
        self.np = np
        self.version = str(cupy.__version__)
        cupy.cuda.Device(self.ordinal).use()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        # The runtime made its context current while creating the stream.
        self.context = _current_context_int()

    def sync(self) -> None:
        self.stream.synchronize()

    def _kernel(self, name: str) -> Any:
        if self._mod is None:
            self._mod = self.cp.RawModule(code=KERNEL_SOURCE)
        return self._mod.get_function(name)

    def _buffer(self) -> Any:
        if self._x is None:
            with self.stream:
                self._x = self.cp.zeros(N_X, dtype=self.cp.float32)
            self.sync()
        return self._x

    def _on_stream(self, run: Callable[[int], float]) -> Callable[[int], float]:
        """CuPy launches on the current stream: make ours current around the timing."""
        s = self.stream

        def wrapped(n: int) -> float:
            with s:
                return run(n)

        return wrapped

    def op_stream_query(self) -> Bench:
        s = self.stream

        def run(n: int) -> float:
            rng = range(n)
            last = False
            t0 = _clock()
            for _ in rng:
                last = s.done
            dt = _clock() - t0
            if not last:
                raise RuntimeError("the idle stream reported work pending")
            return dt / n

        return Bench(run, self.sync, "Stream.done")

    def op_event_record(self) -> Bench:
        ev = self.cp.cuda.Event(disable_timing=True)
        self._keep.append(ev)
        return Bench(_per_call(ev.record, (self.stream,)), self.sync)

    def op_launch_empty(self) -> Bench:
        k = self._kernel("empty")
        return Bench(self._on_stream(_per_call(k, ((1,), (1,), ()))), self.sync, "RawModule")

    def op_launch_args(self) -> Bench:
        np = self.np
        k = self._kernel("axpy3")
        kargs = (np.float32(2.0), self._buffer(), np.int32(N_X))
        return Bench(
            self._on_stream(_per_call(k, ((1,), (N_X,), kargs))),
            self.sync,
            "numpy scalars and a cupy.ndarray",
        )

    def op_launch_prepared(self) -> Bench:
        raise Unavailable("CuPy has no prepared launch")

    def _graph(self, count: int) -> Any:
        k = self._kernel("empty")
        s = self.stream
        with s:
            k((1,), (1,), ())  # loads the kernel outside the capture
        s.synchronize()
        with s:
            s.begin_capture()
            try:
                for _ in range(count):
                    k((1,), (1,), ())
            finally:
                g = s.end_capture()
        self._keep.append(g)
        return g

    def op_graph_launch(self) -> Bench:
        g = self._graph(1)
        return Bench(_per_call(g.launch, (self.stream,)), self.sync, "Stream.begin_capture")

    def op_eager_100(self) -> Bench:
        k = self._kernel("empty")
        grid, block, kargs = (1,), (1,), ()

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                k(grid, block, kargs)

        return Bench(self._on_stream(_per_batch(body, self.sync)), self.sync)

    def op_graph_100(self) -> Bench:
        g = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            g.launch(s)

        return Bench(_per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        return Bench(
            _per_call(self.stream.launch_host_func, (_noop, None)),
            self.sync,
            "Stream.launch_host_func",
        )

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []
        launch = self.stream.launch_host_func

        def stamp(_arg: Any) -> None:
            stamps.append(_clock())

        def enqueue() -> None:
            launch(stamp, None)

        return Bench(_latency(enqueue, self.sync, stamps), self.sync, "Stream.launch_host_func")

    def op_write_value32(self) -> Bench:
        raise Unavailable("CuPy has no stream memory operations")

    def op_wait_value32(self) -> Bench:
        raise Unavailable("CuPy has no stream memory operations")

    def op_alloc_free(self) -> Bench:
        rt = self.cp.cuda.runtime
        malloc, free = rt.malloc, rt.free

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                free(malloc(ALLOC_BYTES))
            return (_clock() - t0) / n

        return Bench(
            run, self.sync, "1 MiB, cupy.cuda.runtime.malloc + free (the pool makes no call)"
        )

    def op_alloc_free_async(self) -> Bench:
        rt = self.cp.cuda.runtime
        malloc, free, sp = rt.mallocAsync, rt.freeAsync, self.stream.ptr

        def run(n: int) -> float:
            rng = range(n)
            t0 = _clock()
            for _ in rng:
                free(malloc(ALLOC_BYTES, sp), sp)
            return (_clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, cupy.cuda.runtime.mallocAsync + freeAsync")

    def recover(self) -> None:
        try:
            if self.stream.is_capturing():
                self.stream.end_capture()
        except Exception:
            pass
        try:
            self.stream.synchronize()
        except Exception:
            pass

    def close(self) -> None:
        self._keep.clear()
        self._mod = None
        self._x = None
        s = getattr(self, "stream", None)
        if s is not None:
            try:
                s.synchronize()
            except Exception:
                pass


# -- running ---------------------------------------------------------------------------------


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _warning_note(caught: list[warnings.WarningMessage]) -> str | None:
    if not caught:
        return None
    w = caught[0]
    return f"warning: {w.category.__name__}: {str(w.message).strip().splitlines()[0]}"


def _measure_row(
    peers: Sequence[_Peer],
    states: dict[str, str | None],
    op: Op,
    n: int,
    repeats: int,
    make_current: Callable[[], None],
) -> dict[str, Cell]:
    """Measure ``op`` for every peer, interleaving the peers' repeats.

    Round-robin repeats spread slow drift of the machine (clocks, other load) over
    every layer alike instead of charging it to whichever layer ran last. Warnings
    (e.g. a peer's deprecation notices) are reported in the note, not raised: under
    "warnings as errors" they would otherwise abort the measurement.
    """
    cells: dict[str, Cell] = {}
    live: dict[str, tuple[_Peer, Bench, list[warnings.WarningMessage]]] = {}
    for p in peers:
        state = states[p.name]
        if state is not None:
            status, _, note = state.partition(":")
            cells[p.name] = Cell(status=status, note=note.strip())
            continue
        make_current()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                bench = p.bench(op.name)
                warm_up(bench, n)
            except Unavailable as exc:
                cells[p.name] = Cell(status="n/a", note=str(exc))
                continue
            except Exception as exc:
                p.recover()
                cells[p.name] = Cell(status="error", note=_error_text(exc))
                continue
        live[p.name] = (p, bench, list(caught))
    samples: dict[str, list[float]] = {name: [] for name in live}
    for _ in range(repeats):
        for name in list(live):
            p, bench, caught = live[name]
            make_current()
            with warnings.catch_warnings(record=True) as more:
                warnings.simplefilter("always")
                try:
                    samples[name].append(one_repeat(bench, n))
                except Exception as exc:
                    p.recover()
                    cells[name] = Cell(status="error", note=_error_text(exc))
                    del live[name]
            caught.extend(more)
    for name, (_p, bench, caught) in live.items():
        note = bench.note
        extra = _warning_note(caught)
        if extra:
            note = f"{note}; {extra}" if note else extra
        vals = samples[name]
        cells[name] = Cell(value=float(statistics.median(vals)), samples=vals, note=note)
    return {p.name: cells[p.name] for p in peers}


def _current_context_int() -> int | None:
    try:
        from cuda.bindings import driver as drv

        r = drv.cuCtxGetCurrent()
        if r[0] != drv.CUresult.CUDA_SUCCESS:
            return None
        return int(r[1])
    except Exception:
        return None


def environment(ordinal: int) -> dict[str, Any]:
    """The machine and software the numbers were taken with (no peers)."""
    import numpy as np

    from . import __version__
    from ._bindings import version_string

    env: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cudriver": __version__,
        "cuda_bindings": version_string(),
        "numpy": np.__version__,
        "device": ordinal,
    }
    try:
        from ._runtime import driver_version
        from .device import Device

        major, minor = driver_version()
        env["driver_cuda_version"] = f"{major}.{minor}"
        dev = Device(ordinal)
        env["gpu"] = dev.name
        env["compute_capability"] = str(dev.compute_capability)
    except Exception as exc:
        env["gpu_error"] = _error_text(exc)
    try:
        from cuda.bindings import driver as drv

        r = drv.cuDriverGetVersion()
        if r[0] == drv.CUresult.CUDA_SUCCESS:
            env["driver_api_version"] = int(r[1])
    except Exception:
        pass
    env["driver_release"] = _driver_release()
    return env


def _driver_release() -> str | None:
    """The kernel module's version (e.g. ``"580.95.05"``), read from /proc on Linux."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as f:
            first = f.readline()
    except OSError:
        return None
    for tok in first.split():
        parts = tok.split(".")
        if len(parts) >= 2 and all(p.isdigit() for p in parts):
            return tok
    return None


def _arch_of(ordinal: int) -> str:
    """``"sm_XY"`` for device ``ordinal``, read with raw calls (no cudriver object)."""
    from cuda.bindings import driver as drv

    a = drv.CUdevice_attribute
    dev = drv.cuDeviceGet(ordinal)
    if dev[0] != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuDeviceGet returned {dev[0]!r}")
    cc = []
    for attr in (
        a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
    ):
        r = drv.cuDeviceGetAttribute(attr, dev[1])
        if r[0] != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuDeviceGetAttribute returned {r[0]!r}")
        cc.append(int(r[1]))
    return f"sm_{cc[0]}{cc[1]}"


def run_benchmarks(
    names: Iterable[str], *, quick: bool, repeats: int, ordinal: int = 0
) -> tuple[dict[str, Any], list[Row]]:
    """Set up every peer, measure the named operations, evaluate the targets.

    Returns the environment and the rows. Each measurement is isolated: a failure
    becomes an ``error`` cell and the run goes on.
    """
    cudriver_peer = _CudriverPeer(ordinal)

    def arch() -> str:
        return _arch_of(ordinal)

    peers: list[_Peer] = [
        cudriver_peer,
        _RawPeer(ordinal),
        _CudaCorePeer(ordinal, arch),
        _CupyPeer(ordinal),
    ]
    states: dict[str, str | None] = {}
    env = environment(ordinal)
    setup_warnings: dict[str, list[str]] = {}
    for p in peers:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                p.setup()
                states[p.name] = None
            except Unavailable as exc:
                states[p.name] = f"n/a: {exc}"
            except Exception as exc:
                states[p.name] = f"error: setup failed: {_error_text(exc)}"
        setup_warnings[p.name] = [f"{w.category.__name__}: {w.message}" for w in caught]
    # Every peer must work in the device's primary context, current on this thread.
    if states["cudriver"] is None:
        try:
            cudriver_peer.make_current()
        except Exception as exc:
            states["cudriver"] = f"error: {_error_text(exc)}"
    live = {p.name: p.context for p in peers if states[p.name] is None}
    env["peers"] = {
        p.name: {
            "version": p.version,
            "state": states[p.name] or "ok",
            "context": None if p.context is None else hex(p.context),
            "warnings": setup_warnings[p.name],
        }
        for p in peers
    }
    env["shared_primary_context"] = (
        "cudriver" in live and len(set(live.values())) == 1 and None not in live.values()
    )
    primary = live.get("cudriver")

    def make_current() -> None:
        if primary is not None:
            try:
                cudriver_peer.make_current()
            except Exception:
                pass

    rows: list[Row] = []
    try:
        for name in names:
            op = _OPS_BY_NAME[name]
            n = calls_for(op, quick)
            row = Row(op)
            _progress(f"bench: {op.name} ({n} x {repeats})")
            row.cells.update(_measure_row(peers, states, op, n, repeats, make_current))
            rows.append(row)
    finally:
        for p in reversed(peers):
            if states.get(p.name) is None:
                try:
                    p.close()
                except Exception:
                    pass
    evaluate_targets(rows)
    return env, rows


# -- targets and output ----------------------------------------------------------------------


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def evaluate_targets(rows: Sequence[Row]) -> None:
    """Fill each row's ``targets`` from the values of all rows."""
    by_name = {r.op.name: r for r in rows}
    for row in rows:
        targets: list[Target] = []
        name = row.op.name
        if row.op.single_call:
            ratio = row.ratio
            text = f"cudriver/raw <= {RATIO_TARGET:.2f}"
            targets.append(
                Target(text, "n/a" if ratio is None else _verdict(ratio <= RATIO_TARGET))
            )
        if name == "launch_prepared":
            mine = row.value("cudriver")
            theirs = row.value("cuda.core")
            if theirs is None and "launch_args" in by_name:
                theirs = by_name["launch_args"].value("cuda.core")
            text = "< cuda.core launch"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(f"{text} ({theirs:,.0f})", _verdict(mine < theirs)))
        if name == "host_func_enqueue":
            mine, theirs = row.value("cudriver"), row.value("cupy")
            text = f"<= {HOST_FUNC_FRACTION:g} x CuPy"
            if mine is None or theirs is None:
                targets.append(Target(text, "n/a"))
            else:
                targets.append(Target(text, _verdict(mine <= HOST_FUNC_FRACTION * theirs)))
        if name == "graph_100":
            graph = row.value("cudriver")
            eager_row = by_name.get("eager_100")
            eager = eager_row.value("cudriver") if eager_row is not None else None
            text = f"eager/graph >= {GRAPH_SPEEDUP:g}"
            if graph is None or eager is None or graph <= 0:
                targets.append(Target(text, "n/a"))
            else:
                speedup = eager / graph
                targets.append(
                    Target(f"{text} ({speedup:.1f})", _verdict(speedup >= GRAPH_SPEEDUP))
                )
        row.targets = targets


def _fmt_value(cell: Cell | None, unit: str) -> str:
    if cell is None or cell.status == "n/a":
        return "n/a"
    if cell.status != "ok" or cell.value is None:
        return "error"
    return f"{cell.value:,.1f}" if unit == "us" else f"{cell.value:,.0f}"


def format_table(rows: Sequence[Row]) -> str:
    """The results as a plain-text table, followed by the notes and errors."""
    headers = [
        "operation",
        "unit",
        *(PEER_TITLES[p] for p in PEERS),
        "cudriver/raw",
        "target",
    ]
    body: list[list[str]] = []
    for r in rows:
        ratio = r.ratio
        target = "; ".join(f"{t.text} {t.result}" for t in r.targets) or "-"
        body.append(
            [
                r.op.label,
                "µs" if r.op.unit == "us" else r.op.unit,
                *(_fmt_value(r.cells.get(p), r.op.unit) for p in PEERS),
                "n/a" if ratio is None else f"{ratio:.2f}",
                target,
            ]
        )
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(headers)
    ]
    left = {0, len(headers) - 1}

    def line(cols: Sequence[str]) -> str:
        out = []
        for i, c in enumerate(cols):
            out.append(c.ljust(widths[i]) if i in left else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    lines = [line(headers), line(["-" * w for w in widths])]
    lines.extend(line(b) for b in body)
    notes: list[str] = []
    for r in rows:
        for p in PEERS:
            c = r.cells.get(p)
            if c is not None and c.note:
                tag = "error" if c.status == "error" else ("n/a" if c.status == "n/a" else "note")
                notes.append(f"  {r.op.name} [{PEER_TITLES[p]}] {tag}: {c.note}")
    if notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(notes)
    return "\n".join(lines)


def _json_number(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def to_json(env: dict[str, Any], rows: Sequence[Row], settings: dict[str, Any]) -> dict[str, Any]:
    """A JSON-ready dictionary with the environment, the settings and every row."""
    out_rows: list[dict[str, Any]] = []
    for r in rows:
        cells: dict[str, Any] = {}
        for p in PEERS:
            c = r.cells.get(p, Cell(status="n/a", note="not measured"))
            cells[p] = {
                "status": c.status,
                "value": _json_number(c.value) if c.status == "ok" else None,
                "samples": [_json_number(s) for s in c.samples],
                "note": c.note,
            }
        out_rows.append(
            {
                "name": r.op.name,
                "label": r.op.label,
                "unit": r.op.unit,
                "single_call": r.op.single_call,
                "results": cells,
                "ratio_cudriver_raw": _json_number(r.ratio),
                "targets": [{"text": t.text, "result": t.result} for t in r.targets],
            }
        )
    return {"schema": 1, "environment": env, "settings": settings, "rows": out_rows}


def _failed(rows: Sequence[Row]) -> bool:
    for r in rows:
        if any(t.result == "MISS" for t in r.targets):
            return True
        c = r.cells.get("cudriver")
        if c is not None and c.status == "error":
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (2: no driver, 1: a CUDA error)."""
    from .errors import CudaError, DriverNotFoundError

    args = parse_args(argv)
    if args.list:
        for op in OPS:
            print(f"{op.name:<20} {op.label}")
        return 0
    try:
        from ._runtime import init

        init()
        env, rows = run_benchmarks(
            args.only, quick=args.quick, repeats=args.repeats, ordinal=args.device
        )
    except DriverNotFoundError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return 2
    except CudaError as exc:
        print(f"cudriver: {exc}", file=sys.stderr)
        return 1
    gpu = env.get("gpu", "unknown GPU")
    print(
        f"cudriver {env['cudriver']}, cuda-bindings {env['cuda_bindings']}, "
        f"CUDA driver {env.get('driver_cuda_version', '?')}, {gpu}, Python {env['python']}"
    )
    peers = ", ".join(
        f"{PEER_TITLES[k]} {v['version'] or '-'}"
        + ("" if v["state"] == "ok" else f" ({v['state']})")
        for k, v in env["peers"].items()
    )
    print(f"peers: {peers}")
    print(f"median of {args.repeats} repeats; ns per call on the host, µs per batch to completion")
    print()
    print(format_table(rows))
    if args.json:
        settings = {
            "quick": args.quick,
            "repeats": args.repeats,
            "only": list(args.only),
            "calls": {name: calls_for(_OPS_BY_NAME[name], args.quick) for name in args.only},
        }
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(to_json(env, rows, settings), f, indent=2)
            f.write("\n")
    if args.check and _failed(rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
