"""Where the time of a one-call operation goes, between the C floor and cudriver.

Usage::

    python -m benchmarks.call_breakdown [--calls 20000] [--repeats 7]

Nanoseconds per call (median of ``--repeats``), on one idle stream, for event record,
stream query, stream synchronize, graph launch (one kernel node) and an empty launch:

* **C floor**: the call made and timed in C (``benchmarks.peer_c``);
* **prototype, GIL held**: the smallest compiled function a Python layer can offer,
  ``f(event, stream)`` taking two ints and calling the driver's entry point (from
  ``cuGetProcAddress``) with the GIL held, written in Cython and built at run time;
* **prototype, GIL released**: the same with the GIL released around the call, as
  cudriver, cuda.core, CuPy and the bindings do for every call that enqueues work;
* **cudriver**: the method (compiled or pure, whichever is in use);
* **raw**: the bindings' function (its status not checked).

Two costs are timed alone, inside C loops: one release and reacquisition of the GIL,
and a Python loop calling a Cython no-op with two arguments. The prototypes need Cython
and a C compiler; without them their rows are left out.

Why the GIL is released although it costs: an enqueueing call blocks when the stream's
queue is full, until the GPU drains it. Held across that wait, the GIL would stop a
Python host function queued ahead (the GPU waits for it) and any thread that must run
for the GPU to go on (writing a flag a stream waits for): a deadlock.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks import peer_c
from benchmarks.harness import KERNEL_SOURCE, median_of, per_call, print_rows

PROTO_SOURCE = r"""
# cython: language_level=3
from libc.stdint cimport uintptr_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

ctypedef int (*f_p)(void*) noexcept nogil
ctypedef int (*f_pp)(void*, void*) noexcept nogil
ctypedef int (*f_launch)(void*, unsigned int, unsigned int, unsigned int, unsigned int,
                         unsigned int, unsigned int, unsigned int, void*, void**,
                         void**) noexcept nogil
cdef f_pp p_record = NULL
cdef f_p p_query = NULL
cdef f_p p_sync = NULL
cdef f_pp p_graph = NULL
cdef f_launch p_launch = NULL

def load(uintptr_t record, uintptr_t query, uintptr_t sync, uintptr_t graph,
         uintptr_t launch):
    global p_record, p_query, p_sync, p_graph, p_launch
    p_record = <f_pp>record
    p_query = <f_p>query
    p_sync = <f_p>sync
    p_graph = <f_pp>graph
    p_launch = <f_launch>launch

cdef double now() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec * 1e9 + t.tv_nsec

def nothing(a, b):
    pass

def record_held(uintptr_t e, uintptr_t s):
    if p_record(<void*>e, <void*>s):
        raise RuntimeError("cuEventRecord failed")

def record_released(uintptr_t e, uintptr_t s):
    cdef int st
    with nogil:
        st = p_record(<void*>e, <void*>s)
    if st:
        raise RuntimeError("cuEventRecord failed")

def query_held(uintptr_t s, uintptr_t unused):
    return p_query(<void*>s) == 0

def query_released(uintptr_t s, uintptr_t unused):
    cdef int st
    with nogil:
        st = p_query(<void*>s)
    return st == 0

def sync_held(uintptr_t s, uintptr_t unused):
    if p_sync(<void*>s):
        raise RuntimeError("cuStreamSynchronize failed")

def sync_released(uintptr_t s, uintptr_t unused):
    cdef int st
    with nogil:
        st = p_sync(<void*>s)
    if st:
        raise RuntimeError("cuStreamSynchronize failed")

def graph_held(uintptr_t g, uintptr_t s):
    if p_graph(<void*>g, <void*>s):
        raise RuntimeError("cuGraphLaunch failed")

def graph_released(uintptr_t g, uintptr_t s):
    cdef int st
    with nogil:
        st = p_graph(<void*>g, <void*>s)
    if st:
        raise RuntimeError("cuGraphLaunch failed")

def launch_held(uintptr_t f, uintptr_t s):
    if p_launch(<void*>f, 1, 1, 1, 1, 1, 1, 0, <void*>s, NULL, NULL):
        raise RuntimeError("cuLaunchKernel failed")

def launch_released(uintptr_t f, uintptr_t s):
    cdef int st
    with nogil:
        st = p_launch(<void*>f, 1, 1, 1, 1, 1, 1, 0, <void*>s, NULL, NULL)
    if st:
        raise RuntimeError("cuLaunchKernel failed")

def gil_cycle(int n):
    cdef double t0 = now()
    cdef int i
    for i in range(n):
        with nogil:
            pass
    return (now() - t0) / n
"""


def build_prototype(directory: str) -> Any:
    """Cythonize and compile :data:`PROTO_SOURCE` in ``directory``; the module, or None."""
    cc = peer_c.compiler()
    if cc is None or importlib.util.find_spec("Cython") is None:
        return None
    pyx = os.path.join(directory, "cudriver_proto.pyx")
    c = os.path.join(directory, "cudriver_proto.c")
    so = os.path.join(
        directory, "cudriver_proto" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    )
    with open(pyx, "w", encoding="utf-8") as f:
        f.write(PROTO_SOURCE)
    steps = [
        [sys.executable, "-m", "cython", "-3", pyx, "-o", c],
        [cc, "-O2", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", c, "-o", so],
    ]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
        if p.returncode != 0:
            print(f"prototype not built: {(p.stdout + p.stderr).strip()[-300:]}", file=sys.stderr)
            return None
    loader = importlib.machinery.ExtensionFileLoader("cudriver_proto", so)
    spec = importlib.util.spec_from_file_location("cudriver_proto", so, loader=loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    dev = cu.Device(0)
    ctx = dev.primary_context()
    ctx.set_current()
    s = cu.Stream(non_blocking=True)  # as the peers' streams
    ev = cu.Event(timing=False)
    image = cu.compile(KERNEL_SOURCE, name="breakdown.cu", arch=dev.compute_capability)
    mod = cu.Module.load(image)
    k = mod.kernel("empty")
    k.launch(s, 1, 1)
    s.synchronize()
    with s.capture() as g:
        k.launch(s, 1, 1)
    exe = g.instantiate()
    sh, eh, gh, fh = int(s), int(ev), int(exe), int(k)
    version = int(drv.cuDriverGetVersion()[1])

    def ep(name: str) -> int:
        return peer_c.entry_point(name, version)

    tmp = tempfile.mkdtemp(prefix="cudriver-breakdown-")
    try:
        dll = peer_c.build(tmp)
        proto = build_prototype(tmp)
        calls, reps = args.calls, args.repeats

        def c_floor(fn: Any, *a: Any) -> Callable[[int], float]:
            return lambda n: float(fn(*a, n))

        ops: list[tuple[str, Callable[[int], float], str, tuple[int, int], Any, Any]] = [
            (
                "event record",
                c_floor(dll.t_pp, ep("cuEventRecord"), eh, sh),
                "record",
                (eh, sh),
                per_call(ev.record, (s,)),
                per_call(drv.cuEventRecord, (ev.handle, s.handle)),
            ),
            (
                "stream query",
                c_floor(dll.t_p, ep("cuStreamQuery"), sh),
                "query",
                (sh, 0),
                per_call(s.query, ()),
                per_call(drv.cuStreamQuery, (s.handle,)),
            ),
            (
                "stream synchronize",
                c_floor(dll.t_p, ep("cuStreamSynchronize"), sh),
                "sync",
                (sh, 0),
                per_call(s.synchronize, ()),
                per_call(drv.cuStreamSynchronize, (s.handle,)),
            ),
            (
                "graph launch",
                c_floor(dll.t_pp, ep("cuGraphLaunch"), gh, sh),
                "graph",
                (gh, sh),
                per_call(exe.launch, (s,)),
                per_call(drv.cuGraphLaunch, (exe.handle, s.handle)),
            ),
            (
                "launch, no arguments",
                c_floor(dll.t_launch, ep("cuLaunchKernel"), fh, 1, sh, None),
                "launch",
                (fh, sh),
                per_call(k.launch, (s, 1, 1)),
                None,
            ),
        ]
        if proto is not None:
            proto.load(
                ep("cuEventRecord"),
                ep("cuStreamQuery"),
                ep("cuStreamSynchronize"),
                ep("cuGraphLaunch"),
                ep("cuLaunchKernel"),
            )
        rows: dict[str, float] = {}
        for label, floor, name, pargs, mine, raw in ops:
            rows[f"{label}: C floor"] = median_of(floor, calls, reps)
            s.synchronize()
            if proto is not None:
                held = per_call(getattr(proto, f"{name}_held"), pargs)
                rows[f"{label}: prototype, GIL held"] = median_of(held, calls, reps)
                s.synchronize()
                released = per_call(getattr(proto, f"{name}_released"), pargs)
                rows[f"{label}: prototype, GIL released"] = median_of(released, calls, reps)
                s.synchronize()
            rows[f"{label}: cudriver"] = median_of(mine, calls, reps)
            s.synchronize()
            if raw is not None:
                rows[f"{label}: raw"] = median_of(raw, calls, reps)
                s.synchronize()
        if proto is not None:
            rows["Python loop + call of a Cython no-op"] = median_of(
                per_call(proto.nothing, (1, 2)), calls, reps
            )
            rows["GIL release + reacquire (in C)"] = median_of(proto.gil_cycle, calls * 5, reps)
    finally:
        s.synchronize()
        shutil.rmtree(tmp, ignore_errors=True)
        exe.close()
        g.close()
        mod.close()
        ev.close()
        s.close()
    result = {
        "gpu": dev.name,
        "implementation": cu.info().get("implementation"),
        "ns": {k2: round(v, 1) for k2, v in rows.items()},
    }
    print_rows(rows, "ns", 1, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
