"""What the overhead benchmark measures and how: the operations, the rows, the timing.

The benchmark measures, in one process, on one device and in its primary context, how
much host time each layer spends per call on the hot paths (stream query, event record,
kernel and graph launches, host functions, stream memory operations, allocation), and how
long an ``await stream`` takes against a blocking synchronize.

Every number is the median of several repeats; each repeat times many calls in a row
with :func:`time.perf_counter_ns` after a warm-up, with the garbage collector off. A peer
that is not installed, or lacks an operation, shows ``n/a``; one that fails on an
operation shows ``error`` and the message is printed under the table, while the other
measurements go on.

This module imports neither cudriver nor ``cuda.bindings``: the option parsing, the
timing, the targets and the output run (and are tested) without them.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The one kernel source every layer compiles for the current device.
KERNEL_SOURCE = r"""
extern "C" __global__ void empty() {}

// Busy for ns nanoseconds of the GPU's global timer (one thread).
extern "C" __global__ void spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

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
HOST_FUNCS_PER_BATCH = 100
#: How long the ``spin`` kernel of the busy-await rows runs.
SPIN_NS = 100_000

PEERS = ("cudriver", "raw", "cuda.core", "cupy", "c")
PEER_TITLES = {
    "cudriver": "cudriver",
    "raw": "raw",
    "cuda.core": "cuda.core",
    "cupy": "CuPy",
    "c": "C floor",
}


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
    Op("launch_ex", "launch with an attribute (cuLaunchKernelEx)", "ns", 10_000, True),
    Op("graph_launch", "graph launch (1 node)", "ns", 10_000, True),
    Op("eager_100", "100 kernels, eager, to completion", "us", 200, False),
    Op("graph_100", "100 kernels, one graph, to completion", "us", 200, False),
    Op("host_func_enqueue", "host function, enqueue", "ns", 2_000, False),
    Op("host_func_latency", "host function, enqueue to running", "ns", 500, False),
    Op("host_func_100", "100 host functions + synchronize", "us", 100, False),
    Op("await_stream", "await stream (idle), enqueue to the loop resuming", "ns", 500, False),
    Op(
        "await_busy",
        "100 µs kernel, then await stream: launch to the loop resuming",
        "us",
        300,
        False,
    ),
    Op(
        "await_busy_executor",
        "100 µs kernel, then await run_in_executor(stream.synchronize)",
        "us",
        300,
        False,
    ),
    Op("stream_sync", "stream synchronize (idle)", "ns", 10_000, True),
    Op("write_value32", "write_value32", "ns", 10_000, True),
    Op("wait_value32", "wait_value32 (already satisfied)", "ns", 10_000, True),
    Op("alloc_free", "DeviceBuffer alloc+free", "ns", 1_000, True),
    Op("alloc_free_async", "DeviceBuffer alloc+free, stream-ordered", "ns", 2_000, True),
    Op("pool_alloc_free", "alloc+free from a pool keeping freed memory", "ns", 2_000, True),
    Op("pool_cycle_sync", "alloc+free+synchronize, 1 MiB", "ns", 1_000, False),
)
OP_NAMES: tuple[str, ...] = tuple(op.name for op in OPS)
OPS_BY_NAME = {op.name: op for op in OPS}

QUICK_DIVISOR = 10


def calls_for(op: Op, quick: bool) -> int:
    """Calls (or batches) per repeat for ``op``."""
    return max(1, op.calls // QUICK_DIVISOR) if quick else op.calls


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


clock = time.perf_counter_ns


def per_call(
    f: Callable[..., Any], args: tuple[Any, ...], check: Callable[[Any], None] | None = None
) -> Callable[[int], float]:
    """``run(n)``: ``n`` calls of ``f(*args)`` in a tight loop; ns per call."""

    def run(n: int) -> float:
        rng = range(n)
        r: Any = None
        t0 = clock()
        for _ in rng:
            r = f(*args)
        dt = clock() - t0
        if check is not None:
            check(r)
        return dt / n

    return run


def per_batch(body: Callable[[], None], sync: Callable[[], None]) -> Callable[[int], float]:
    """``run(n)``: ``n`` times ``body(); sync()``; mean wall time per batch in µs."""

    def run(n: int) -> float:
        total = 0
        for _ in range(n):
            t0 = clock()
            body()
            sync()
            total += clock() - t0
        return total / n / 1000.0

    return run


def latency(
    enqueue: Callable[[], None], sync: Callable[[], None], stamps: list[int]
) -> Callable[[int], float]:
    """``run(n)``: median ns from before the enqueue to the callable's own clock reading."""

    def run(n: int) -> float:
        out: list[int] = []
        for _ in range(n):
            stamps.clear()
            t0 = clock()
            enqueue()
            sync()
            if not stamps:
                raise RuntimeError("the host function did not run before the stream completed")
            out.append(stamps[0] - t0)
        return float(statistics.median(out))

    return run


def median_of(fn: Callable[[int], float], calls: int, repeats: int) -> float:
    """The median of ``repeats`` runs of ``fn(calls)``, after one warm-up of a tenth."""
    fn(max(1, calls // 10))
    return float(statistics.median(fn(calls) for _ in range(repeats)))


def print_rows(rows: dict[str, float], unit: str, digits: int, result: dict[str, Any]) -> None:
    """Print a small benchmark's ``rows`` (label: value), then ``result`` as one JSON line."""
    width = max(map(len, rows))
    for k, v in rows.items():
        print(f"  {k:<{width}}  {v:8.{digits}f} {unit}")
    print(json.dumps(result))


def close_quietly(objs: Iterable[Any]) -> None:
    """Close each object, ignoring failures: teardown must reach every object."""
    for obj in objs:
        if obj is None:
            continue
        try:
            obj.close()
        except Exception:
            pass


def noop(*args: Any) -> None:
    return None


# -- peers -----------------------------------------------------------------------------------


class Peer:
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


def error_text(exc: BaseException) -> str:
    """The exception's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _warning_note(caught: list[warnings.WarningMessage]) -> str | None:
    if not caught:
        return None
    w = caught[0]
    return f"warning: {w.category.__name__}: {str(w.message).strip().splitlines()[0]}"


def measure_row(
    peers: Sequence[Peer],
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
    live: dict[str, tuple[Peer, Bench, list[warnings.WarningMessage]]] = {}
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
                cells[p.name] = Cell(status="error", note=error_text(exc))
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
                    cells[name] = Cell(status="error", note=error_text(exc))
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
