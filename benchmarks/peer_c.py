"""The floor: the same driver calls made from C, timed in C.

A small C file (``C_SOURCE``) is compiled at run time with the system's C compiler into
a shared library and loaded with ctypes. Each of its functions times ``n`` calls of one
driver entry point, called through the function pointer that ``cuGetProcAddress`` gives
for the installed driver, with ``clock_gettime(CLOCK_MONOTONIC)``, and returns the
nanoseconds per call (or minus the first failing status). No Python runs inside the
timed loop: what is left is the driver's own cost, plus one indirect call.

The objects it works on (the stream, the kernels, the graph, the pool, the launch
configuration) are made by the raw peer's setup in the same primary context, so every
column times the same work. Without a C compiler the column is ``n/a``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile
from typing import Any

from benchmarks.harness import ALLOC_BYTES, N_X, Bench, Peer, Unavailable
from benchmarks.peer_raw import RawPeer

C_SOURCE = r"""
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int (*f_p)(void*);
typedef int (*f_pp)(void*, void*);
typedef int (*f_launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void*, void**, void**);
typedef int (*f_launch_ex)(const void*, void*, void**, void**);
typedef void (*host_fn)(void*);
typedef int (*f_host)(void*, host_fn, void*);
typedef int (*f_value32)(void*, uint64_t, uint32_t, unsigned);
typedef int (*f_alloc)(uint64_t*, size_t);
typedef int (*f_free)(uint64_t);
typedef int (*f_alloc_async)(uint64_t*, size_t, void*);
typedef int (*f_free_async)(uint64_t, void*);
typedef int (*f_alloc_pool)(uint64_t*, size_t, void*, void*);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void noop(void* p) { (void)p; }

double t_p(void* fn, void* a, int n) {
    f_p f = (f_p)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) { int r = f(a); if (r) return -r; }
    return (now() - t0) / n;
}

double t_pp(void* fn, void* a, void* b, int n) {
    f_pp f = (f_pp)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) { int r = f(a, b); if (r) return -r; }
    return (now() - t0) / n;
}

double t_launch(void* fn, void* func, unsigned block, void* stream, void** params, int n) {
    f_launch f = (f_launch)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        int r = f(func, 1, 1, 1, block, 1, 1, 0, stream, params, NULL);
        if (r) return -r;
    }
    return (now() - t0) / n;
}

double t_launch_ex(void* fn, const void* config, void* func, int n) {
    f_launch_ex f = (f_launch_ex)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) { int r = f(config, func, NULL, NULL); if (r) return -r; }
    return (now() - t0) / n;
}

double t_host(void* fn, void* stream, int n) {
    f_host f = (f_host)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) { int r = f(stream, noop, NULL); if (r) return -r; }
    return (now() - t0) / n;
}

double t_value32(void* fn, void* stream, uint64_t addr, uint32_t value, unsigned flags, int n) {
    f_value32 f = (f_value32)fn;
    double t0 = now();
    for (int i = 0; i < n; i++) { int r = f(stream, addr, value, flags); if (r) return -r; }
    return (now() - t0) / n;
}

double t_alloc_free(void* alloc, void* release, size_t bytes, int n) {
    f_alloc a = (f_alloc)alloc;
    f_free f = (f_free)release;
    uint64_t p;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        int r = a(&p, bytes); if (r) return -r;
        r = f(p); if (r) return -r;
    }
    return (now() - t0) / n;
}

double t_alloc_free_async(void* alloc, void* release, size_t bytes, void* stream, int n) {
    f_alloc_async a = (f_alloc_async)alloc;
    f_free_async f = (f_free_async)release;
    uint64_t p;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        int r = a(&p, bytes, stream); if (r) return -r;
        r = f(p, stream); if (r) return -r;
    }
    return (now() - t0) / n;
}

double t_alloc_free_pool(void* alloc, void* release, size_t bytes, void* pool, void* stream,
                         int n) {
    f_alloc_pool a = (f_alloc_pool)alloc;
    f_free_async f = (f_free_async)release;
    uint64_t p;
    double t0 = now();
    for (int i = 0; i < n; i++) {
        int r = a(&p, bytes, pool, stream); if (r) return -r;
        r = f(p, stream); if (r) return -r;
    }
    return (now() - t0) / n;
}
"""

_V, _I, _U, _S, _U64, _U32, _D = (
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_size_t,
    ctypes.c_uint64,
    ctypes.c_uint32,
    ctypes.c_double,
)
SIGNATURES: dict[str, tuple[Any, ...]] = {
    "t_p": (_V, _V, _I),
    "t_pp": (_V, _V, _V, _I),
    "t_launch": (_V, _V, _U, _V, _V, _I),
    "t_launch_ex": (_V, _V, _V, _I),
    "t_host": (_V, _V, _I),
    "t_value32": (_V, _V, _U64, _U32, _U, _I),
    "t_alloc_free": (_V, _V, _S, _I),
    "t_alloc_free_async": (_V, _V, _S, _V, _I),
    "t_alloc_free_pool": (_V, _V, _S, _V, _V, _I),
}


def compiler() -> str | None:
    """The C compiler to use (``$CC``, else ``cc`` or ``gcc`` on PATH), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def build(directory: str) -> ctypes.CDLL:
    """Compile :data:`C_SOURCE` into ``directory`` and load it, its functions typed.

    Raises
    ------
    Unavailable
        There is no C compiler, or it failed (its output in the message).
    """
    cc = compiler()
    if cc is None:
        raise Unavailable("no C compiler (set CC, or install cc/gcc)")
    src = os.path.join(directory, "cfloor.c")
    lib = os.path.join(directory, "cfloor.so")
    with open(src, "w", encoding="utf-8") as f:
        f.write(C_SOURCE)
    p = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", "-o", lib, src],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if p.returncode != 0:
        raise Unavailable(f"{cc} failed: {(p.stdout + p.stderr).strip()[-500:]}")
    dll = ctypes.CDLL(lib)
    for name, types in SIGNATURES.items():
        fn = getattr(dll, name)
        fn.argtypes = list(types)
        fn.restype = _D
    return dll


def entry_point(name: str, version: int) -> int:
    """The address of driver entry point ``name`` for CUDA ``version`` (``cuGetProcAddress``)."""
    from cuda.bindings import driver as drv

    r = drv.cuGetProcAddress(name.encode(), version, 0)
    if r[0] != drv.CUresult.CUDA_SUCCESS or not int(r[1]):
        raise Unavailable(f"cuGetProcAddress({name!r}) returned {r[0]!r}")
    return int(r[1])


class CPeer(Peer):
    """The same driver calls from C: the floor a Python layer can approach."""

    name = "c"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.raw = RawPeer(ordinal)
        self._dir: str | None = None
        self.dll: Any = None
        self._fns: dict[str, int] = {}

    def setup(self) -> None:
        from cuda.bindings import driver as drv

        self.raw.setup()
        self.context = self.raw.context
        self._dir = tempfile.mkdtemp(prefix="cudriver-cfloor-")
        self.dll = build(self._dir)
        self.version = compiler()
        self._cuda = int(drv.cuDriverGetVersion()[1])
        self.h = int(self.raw.h)

    def sync(self) -> None:
        self.raw.sync()

    def _ep(self, name: str) -> int:
        a = self._fns.get(name)
        if a is None:
            a = self._fns[name] = entry_point(name, self._cuda)
        return a

    def _bench(self, fn: Any, *args: Any, note: str = "") -> Bench:
        def run(n: int) -> float:
            v = float(fn(*args, n))
            if v < 0:
                raise RuntimeError(f"a timed call returned status {int(-v)}")
            return v

        return Bench(run, self.sync, note)

    def op_stream_query(self) -> Bench:
        return self._bench(self.dll.t_p, self._ep("cuStreamQuery"), self.h)

    def op_event_record(self) -> Bench:
        self.raw.op_event_record()  # makes the event, as the raw peer does
        ev = int(self.raw._events[-1])
        return self._bench(self.dll.t_pp, self._ep("cuEventRecord"), ev, self.h)

    def op_launch_empty(self) -> Bench:
        f = int(self.raw._fn("empty"))
        return self._bench(self.dll.t_launch, self._ep("cuLaunchKernel"), f, 1, self.h, None)

    def _params(self) -> int:
        a = ctypes.c_float(2.0)
        p = ctypes.c_void_p(int(self.raw._buffer()))
        n = ctypes.c_int(N_X)
        arr = (ctypes.c_void_p * 3)(ctypes.addressof(a), ctypes.addressof(p), ctypes.addressof(n))
        self.raw._keep.extend((a, p, n, arr))
        return ctypes.addressof(arr)

    def op_launch_args(self) -> Bench:
        f = int(self.raw._fn("axpy3"))
        return self._bench(
            self.dll.t_launch,
            self._ep("cuLaunchKernel"),
            f,
            N_X,
            self.h,
            self._params(),
            note="kernelParams packed once (C has no per-call packing)",
        )

    def op_launch_prepared(self) -> Bench:
        return self.op_launch_args()

    def op_launch_ex(self) -> Bench:
        from cuda.bindings import driver as drv

        cfg = drv.CUlaunchConfig()
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1
        cfg.sharedMemBytes = 0
        cfg.hStream = self.raw.h
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        cfg.attrs = [attr]
        cfg.numAttrs = 1  # the raw peer's configuration: one cooperative attribute
        self.raw._keep.extend((cfg, attr))
        f = int(self.raw._fn("empty"))
        return self._bench(
            self.dll.t_launch_ex,
            self._ep("cuLaunchKernelEx"),
            int(cfg.getPtr()),
            f,
            note="the bindings' CUlaunchConfig struct, by address",
        )

    def op_graph_launch(self) -> Bench:
        exe = int(self.raw._graph(1))
        return self._bench(self.dll.t_pp, self._ep("cuGraphLaunch"), exe, self.h)

    def op_host_func_enqueue(self) -> Bench:
        return self._bench(
            self.dll.t_host, self._ep("cuLaunchHostFunc"), self.h, note="a C no-op function"
        )

    def op_stream_sync(self) -> Bench:
        return self._bench(self.dll.t_p, self._ep("cuStreamSynchronize"), self.h)

    def op_write_value32(self) -> Bench:
        p = int(self.raw._flag())
        return self._bench(self.dll.t_value32, self._ep("cuStreamWriteValue32"), self.h, p, 1, 0)

    def op_wait_value32(self) -> Bench:
        from cuda.bindings import driver as drv

        p = int(self.raw._flag())
        geq = int(drv.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        return self._bench(self.dll.t_value32, self._ep("cuStreamWaitValue32"), self.h, p, 1, geq)

    def op_alloc_free(self) -> Bench:
        return self._bench(
            self.dll.t_alloc_free,
            self._ep("cuMemAlloc"),
            self._ep("cuMemFree"),
            ALLOC_BYTES,
            note="1 MiB, cuMemAlloc + cuMemFree",
        )

    def op_alloc_free_async(self) -> Bench:
        return self._bench(
            self.dll.t_alloc_free_async,
            self._ep("cuMemAllocAsync"),
            self._ep("cuMemFreeAsync"),
            ALLOC_BYTES,
            self.h,
            note="1 MiB, cuMemAllocAsync + cuMemFreeAsync",
        )

    def op_pool_alloc_free(self) -> Bench:
        pool = int(self.raw._pool())
        return self._bench(
            self.dll.t_alloc_free_pool,
            self._ep("cuMemAllocFromPoolAsync"),
            self._ep("cuMemFreeAsync"),
            ALLOC_BYTES,
            pool,
            self.h,
            note="1 MiB from a pool keeping freed memory",
        )

    def recover(self) -> None:
        self.raw.recover()

    def close(self) -> None:
        self.raw.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
