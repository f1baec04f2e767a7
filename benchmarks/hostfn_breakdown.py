"""Where the time of enqueuing a host function goes, and the floor.

Usage::

    python -m benchmarks.hostfn_breakdown [--calls 5000] [--repeats 7]

Nanoseconds per enqueue (median of ``--repeats``; each repeat enqueues ``--calls``
host functions on one idle stream in a tight loop, then synchronizes outside the
timing), for:

* the raw bindings' ``cuLaunchHostFunc`` with a ctypes trampoline running a Python
  no-op (the ``raw`` peer of the overhead benchmark);
* ``cuLaunchHostFunc`` of ``libcuda`` called through ctypes (the bindings' version
  wraps every host function in a callback of theirs that takes the GIL) with a C
  function that runs no Python (libc ``free(NULL)``): the driver's own cost, with
  nothing competing for the GIL;
* the same ctypes call with the compiled core's C trampoline and a key registered
  the way :meth:`Stream.launch_host_func` registers it (the design's floor: the
  trampoline runs the Python no-op on the driver's thread);
* ``cuStreamIsCapturing`` alone, through the bindings (the check an enqueue makes so
  that a host function captured by any library's capture keeps its record; the
  compiled core calls it from C, where it costs a few tens of nanoseconds);
* ``Stream.launch_host_func(noop)``.

The trampoline row reaches two internals of cudriver (the trampoline's address and
the key registry), as a prototype of the floor; every other row uses public names.

While the loop runs, the driver's thread takes the GIL once per host function to run
the Python callable: every row with Python on that thread pays for that hand-off.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import gc
import sys
import time
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import median_of, print_rows

_SUCCESS = drv.CUresult.CUDA_SUCCESS


def noop(*_args: Any) -> None:
    """The host function of every row."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    ctx = cu.Device(0).primary_context()
    ctx.set_current()
    s = cu.Stream()
    h = s.handle
    clock = time.perf_counter_ns
    launch = drv.cuLaunchHostFunc

    tramp = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(noop)
    py_fn = drv.CUhostFn(ctypes.cast(tramp, ctypes.c_void_p).value)
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    free_addr = ctypes.cast(libc.free, ctypes.c_void_p).value
    c_launch = ctypes.CDLL("libcuda.so.1").cuLaunchHostFunc
    c_launch.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    c_launch.restype = ctypes.c_int
    hi = int(h)

    def raw(n: int) -> float:
        t0 = clock()
        for _ in range(n):
            if launch(h, py_fn, 0)[0] is not _SUCCESS:
                raise RuntimeError("cuLaunchHostFunc")
        dt = (clock() - t0) / n
        s.synchronize()
        return dt

    def c_function(n: int) -> float:
        t0 = clock()
        for _ in range(n):
            if c_launch(hi, free_addr, None):
                raise RuntimeError("cuLaunchHostFunc")
        dt = (clock() - t0) / n
        s.synchronize()
        return dt

    hostfn = cu._lifetime._hostfn

    def core_trampoline(n: int) -> float:
        # The compiled core's trampoline, each key registered as launch_host_func does.
        fn = hostfn.trampoline_address()
        eager, keys = hostfn._eager, hostfn._keys
        skey, ckey = hi or 1, ctx._key
        t0 = clock()
        for _ in range(n):
            k = next(keys)
            eager[k] = (noop, (), None, skey, ckey)
            if c_launch(hi, fn, k):
                raise RuntimeError("cuLaunchHostFunc")
        dt = (clock() - t0) / n
        s.synchronize()
        return dt

    def capturing(n: int) -> float:
        query = drv.cuStreamIsCapturing
        t0 = clock()
        for _ in range(n):
            if query(h)[0] is not _SUCCESS:
                raise RuntimeError("cuStreamIsCapturing")
        return (clock() - t0) / n

    def ours(n: int) -> float:
        enqueue = s.launch_host_func
        t0 = clock()
        for _ in range(n):
            enqueue(noop)
        dt = (clock() - t0) / n
        s.synchronize()
        return dt

    def median(fn: Callable[[int], float]) -> float:
        return median_of(fn, args.calls, args.repeats)

    rows: dict[str, float] = {}
    gc.disable()
    try:
        rows["raw: bindings + ctypes trampoline (Python no-op)"] = median(raw)
        rows["libcuda + C function (no Python)"] = median(c_function)
        rows["libcuda + cudriver's C trampoline (Python no-op)"] = median(core_trampoline)
        rows["cuStreamIsCapturing through the bindings"] = median(capturing)
        rows["Stream.launch_host_func(noop)"] = median(ours)
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
