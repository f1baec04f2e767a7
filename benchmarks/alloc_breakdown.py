"""Where the time of a stream-ordered allocation and free goes, and the floor.

Usage::

    python -m benchmarks.alloc_breakdown [--calls 20000] [--repeats 7]

Nanoseconds per buffer (median of ``--repeats``), 1 MiB on one stream, for:

* the raw bindings (``cuMemAllocAsync`` + ``cuMemFreeAsync``, statuses checked);
* a floor prototype: the smallest owning object one can write over the bindings (a
  ``__slots__`` class whose ``close()`` frees, with no lifetime rules at all);
* ``DeviceBuffer(n, stream=s).close()``, and its two halves timed apart (the
  constructor for ``--calls`` buffers, then their ``close()``);
* ``DeviceBuffer(n, stream=s)`` dropped without ``close()`` (the deallocator frees);
* the same three for a ``MemoryPool`` (``cuMemAllocFromPoolAsync``);
* the parts of the owning object, each made and dropped alone (a call of an empty
  function, the loop's own cost, is the first of them): the Python object with its
  fields, the ``CUdeviceptr`` handle, the release state (without the stream and the
  context it keeps), the set of other streams that used the buffer;
* first, the synchronous pair (``cuMemAlloc`` + ``cuMemFree``): raw, the floor,
  and ``DeviceBuffer(n).close()``;
* what accounting costs: ``DeviceBuffer(...).close()`` with
  :func:`cudriver.set_memory_accounting` on, and with a history of sites
  (:func:`cudriver.record_memory_history`);
* ``allocate(n).close()`` through each built-in memory resource and one written in
  Python (over ``cuMemAllocAsync``); the pinned, managed and virtual ones with a
  twentieth of ``--calls`` (their allocations cost far more).

The garbage collector is off while timing, as in the overhead benchmark.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import median_of, print_rows

N = 1 << 20
_SUCCESS = drv.CUresult.CUDA_SUCCESS


class _Floor:
    """The floor: an owning object with no lifetime rules (not safe; for measuring)."""

    __slots__ = ("h", "ptr")

    def __init__(self, n: int, h: object) -> None:
        r = drv.cuMemAllocAsync(n, h)
        if r[0] is not _SUCCESS:
            raise RuntimeError(r[0])
        self.ptr = r[1]
        self.h = h

    def close(self) -> None:
        r = drv.cuMemFreeAsync(self.ptr, self.h)
        if r[0] is not _SUCCESS:
            raise RuntimeError(r[0])


class _PyResource(cu.MemoryResource):
    """A resource written in Python over the raw stream-ordered calls."""

    def do_allocate(self, nbytes: int, *, stream: object) -> int:
        r = drv.cuMemAllocAsync(nbytes, stream.handle)  # type: ignore[attr-defined]
        if r[0] is not _SUCCESS:
            raise RuntimeError(r[0])
        return int(r[1])

    def do_deallocate(self, address: int, nbytes: int, *, stream: object) -> None:
        drv.cuMemFreeAsync(address, stream.handle)  # type: ignore[attr-defined]


class _SyncFloor:
    """The same floor for ``cuMemAlloc``/``cuMemFree``."""

    __slots__ = ("ptr",)

    def __init__(self, n: int) -> None:
        r = drv.cuMemAlloc(n)
        if r[0] is not _SUCCESS:
            raise RuntimeError(r[0])
        self.ptr = r[1]

    def close(self) -> None:
        if drv.cuMemFree(self.ptr)[0] is not _SUCCESS:
            raise RuntimeError("free")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    ctx = cu.Device(0).primary_context()
    ctx.set_current()
    s = cu.Stream()
    h = s.handle
    pool = cu.MemoryPool(release_threshold=cu.KEEP_ALL)
    clock = time.perf_counter_ns

    def raw(n: int) -> float:
        alloc, free = drv.cuMemAllocAsync, drv.cuMemFreeAsync
        t0 = clock()
        for _ in range(n):
            r = alloc(N, h)
            if r[0] is not _SUCCESS:
                raise RuntimeError(r[0])
            if free(r[1], h)[0] is not _SUCCESS:
                raise RuntimeError("free")
        return (clock() - t0) / n

    def floor(n: int) -> float:
        t0 = clock()
        for _ in range(n):
            _Floor(N, h).close()
        return (clock() - t0) / n

    def raw_sync(n: int) -> float:
        alloc, free = drv.cuMemAlloc, drv.cuMemFree
        t0 = clock()
        for _ in range(n):
            r = alloc(N)
            if r[0] is not _SUCCESS:
                raise RuntimeError(r[0])
            if free(r[1])[0] is not _SUCCESS:
                raise RuntimeError("free")
        return (clock() - t0) / n

    def floor_sync(n: int) -> float:
        t0 = clock()
        for _ in range(n):
            _SyncFloor(N).close()
        return (clock() - t0) / n

    def plain(n: int) -> float:
        make = cu.DeviceBuffer
        t0 = clock()
        for _ in range(n):
            make(N).close()
        return (clock() - t0) / n

    def both(**kw: object) -> Callable[[int], float]:
        def run(n: int) -> float:
            make = cu.DeviceBuffer
            t0 = clock()
            for _ in range(n):
                make(N, stream=s, **kw).close()
            return (clock() - t0) / n

        return run

    def halves(**kw: object) -> tuple[Callable[[int], float], Callable[[int], float]]:
        made: list[cu.DeviceBuffer] = []

        def alloc(n: int) -> float:
            make = cu.DeviceBuffer
            made.clear()
            s.synchronize()
            t0 = clock()
            for _ in range(n):
                made.append(make(N, stream=s, **kw))
            dt = (clock() - t0) / n
            for b in made:
                b.close()
            made.clear()
            return dt

        def close(n: int) -> float:
            make = cu.DeviceBuffer
            bufs = [make(N, stream=s, **kw) for _ in range(n)]
            t0 = clock()
            for b in bufs:
                b.close()
            return (clock() - t0) / n

        return alloc, close

    def dropped(**kw: object) -> Callable[[int], float]:
        def run(n: int) -> float:
            make = cu.DeviceBuffer
            t0 = clock()
            for _ in range(n):
                make(N, stream=s, **kw)
            return (clock() - t0) / n

        return run

    def through(mr: object, *, stream: bool = True) -> Callable[[int], float]:
        def run(n: int) -> float:
            allocate = mr.allocate  # type: ignore[attr-defined]
            t0 = clock()
            if stream:
                for _ in range(n):
                    allocate(N, stream=s).close()
            else:
                for _ in range(n):
                    allocate(N).close()
            s.synchronize()
            return (clock() - t0) / n

        return run

    def accounted(run: Callable[[int], float], history: bool) -> Callable[[int], float]:
        def wrapped(n: int) -> float:
            if history:
                cu.record_memory_history(max_entries=4 * n + 16)
            else:
                cu.set_memory_accounting(True)
            try:
                return run(n)
            finally:
                cu.set_memory_accounting(False)
                cu.reset_memory_stats()

        return wrapped

    def part(fn: Callable[[], object]) -> Callable[[int], float]:
        def run(n: int) -> float:
            t0 = clock()
            for _ in range(n):
                fn()
            return (clock() - t0) / n

        return run

    address = 0x7F0000000000
    new_buffer = cu.DeviceBuffer.__new__
    probe = cu.DeviceBuffer(N, stream=s)
    state_type = type(probe._state)  # the release state's class (internal)
    probe.close()
    parts = {
        "part: an empty call (the loop)": part(lambda: None),
        "part: the object and its fields": part(lambda: new_buffer(cu.DeviceBuffer)),
        "part: the CUdeviceptr handle": part(lambda: drv.CUdeviceptr(address)),
        "part: the release state, keeping nothing": part(
            # no keep: a state that keeps the stream would stay its dependant forever
            lambda: state_type(address, None, "cuMemFreeAsync", "DeviceBuffer", (), None)
        ),
        "part: the set of other streams": part(set),
    }
    calls = min(args.calls, 2000)  # live buffers at once in the halves: 2 GiB at most
    few = max(args.calls // 20, 50)
    try:
        pinned_pool: cu.MemoryPool | None = cu.PinnedMemoryPool()
    except cu.CudaError:
        pinned_pool = None
    try:
        managed_pool: cu.MemoryPool | None = cu.ManagedMemoryPool()
    except cu.CudaError:
        managed_pool = None
    a, c = halves()
    pa, pc = halves(pool=pool)
    gc.disable()
    try:
        rows = {
            "raw cuMemAlloc + cuMemFree": median_of(raw_sync, args.calls, args.repeats),
            "floor: the same over cuMemAlloc": median_of(floor_sync, args.calls, args.repeats),
            "DeviceBuffer(n).close()": median_of(plain, args.calls, args.repeats),
            "raw cuMemAllocAsync + cuMemFreeAsync": median_of(raw, args.calls, args.repeats),
            "floor: __slots__ object over the bindings": median_of(floor, args.calls, args.repeats),
            "DeviceBuffer(n, stream=s).close()": median_of(both(), args.calls, args.repeats),
            "  constructor alone": median_of(a, calls, args.repeats),
            "  close() alone": median_of(c, calls, args.repeats),
            "DeviceBuffer(n, stream=s) dropped": median_of(dropped(), args.calls, args.repeats),
            "pool: DeviceBuffer(...).close()": median_of(both(pool=pool), args.calls, args.repeats),
            "pool:   constructor alone": median_of(pa, calls, args.repeats),
            "pool:   close() alone": median_of(pc, calls, args.repeats),
            "accounting on: DeviceBuffer(n).close()": median_of(
                accounted(plain, False), args.calls, args.repeats
            ),
            "accounting on: DeviceBuffer(n, stream=s).close()": median_of(
                accounted(both(), False), args.calls, args.repeats
            ),
            "history on: DeviceBuffer(n, stream=s).close()": median_of(
                accounted(both(), True), args.calls, args.repeats
            ),
            "resource DeviceResource, no stream": median_of(
                through(cu.DeviceResource(), stream=False), args.calls, args.repeats
            ),
            "resource DeviceResource, stream": median_of(
                through(cu.DeviceResource()), args.calls, args.repeats
            ),
            "resource MemoryPool": median_of(through(pool), args.calls, args.repeats),
            "resource written in Python": median_of(
                through(_PyResource()), args.calls, args.repeats
            ),
            "resource PinnedResource (cuMemHostAlloc)": median_of(
                through(cu.PinnedResource(), stream=False), few, args.repeats
            ),
            "resource ManagedResource (cuMemAllocManaged)": median_of(
                through(cu.ManagedResource(), stream=False), few, args.repeats
            ),
            "resource VirtualMemoryResource": median_of(
                through(cu.VirtualMemoryResource(), stream=False), few, args.repeats
            ),
        }
        for name, run in parts.items():
            rows[name] = median_of(run, args.calls, args.repeats)
        if pinned_pool is not None:
            rows["resource PinnedMemoryPool"] = median_of(
                through(pinned_pool), args.calls, args.repeats
            )
        if managed_pool is not None:
            rows["resource ManagedMemoryPool"] = median_of(
                through(managed_pool), args.calls, args.repeats
            )
    finally:
        gc.enable()
        s.synchronize()
    result = {
        "gpu": cu.Device(0).name,
        "implementation": cu.info().get("implementation"),
        "ns": {k.strip(): round(v, 1) for k, v in rows.items()},
    }
    print_rows(rows, "ns", 1, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
