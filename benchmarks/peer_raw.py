"""The baseline: hand-written ``cuda.bindings.driver`` calls, the way a user writes them.

Driver statuses are checked with cudriver's public :func:`cudriver.check`, the one
checking mechanism (teardown ignores them; NVRTC's are not CUresults). The timed loops
test each status by identity, as correct raw code must, and call it only on a failure,
so the baseline costs what the raw code costs.
"""

from __future__ import annotations

import ctypes
import statistics
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import (
    ALLOC_BYTES,
    HOST_FUNCS_PER_BATCH,
    KERNEL_SOURCE,
    KERNELS_PER_BATCH,
    MEMOP_BYTES,
    N_X,
    SPIN_NS,
    Bench,
    Peer,
    clock,
    latency,
    noop,
    per_batch,
)

_SUCCESS = drv.CUresult.CUDA_SUCCESS


def per_call_raw(f: Callable[..., Any], args: tuple[Any, ...], name: str) -> Callable[[int], float]:
    """``run(n)``: ``n`` raw calls, each status checked the way correct raw code must."""
    ok, check = _SUCCESS, cu.check

    def run(n: int) -> float:
        rng = range(n)
        t0 = clock()
        for _ in rng:
            r = f(*args)
            if r[0] is not ok:
                check(r, name)
        return (clock() - t0) / n

    return run


def current_context_int() -> int | None:
    """The context current on this thread as an int, or None (read with a raw call)."""
    try:
        return int(cu.check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent"))
    except Exception:
        return None


def arch_of(ordinal: int) -> str:
    """``"sm_XY"`` for device ``ordinal``, read with raw calls (no cudriver object)."""
    a = drv.CUdevice_attribute
    dev = cu.check(drv.cuDeviceGet(ordinal), "cuDeviceGet")
    major = cu.check(
        drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
        "cuDeviceGetAttribute",
    )
    minor = cu.check(
        drv.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
        "cuDeviceGetAttribute",
    )
    return f"sm_{int(major)}{int(minor)}"


class RawPeer(Peer):
    """Hand-written ``cuda.bindings.driver`` calls, the way a user writes them."""

    name = "raw"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._mod: Any = None
        self._fns: dict[str, Any] = {}
        self._x: Any = None
        self._allocs: list[Any] = []
        self._pools: list[Any] = []
        self._graphs: list[tuple[Any, Any]] = []
        self._events: list[Any] = []
        self._keep: list[Any] = []

    def setup(self) -> None:
        check = cu.check
        self.drv = drv
        self.version = cu.bindings_version()
        check(drv.cuInit(0), "cuInit")
        self.dev = check(drv.cuDeviceGet(self.ordinal), "cuDeviceGet")
        self.ctx = check(drv.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        check(drv.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        flags = int(drv.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self.h = check(drv.cuStreamCreate(flags), "cuStreamCreate")
        self.context = int(self.ctx)

    def sync(self) -> None:
        cu.check(self.drv.cuStreamSynchronize(self.h), "cuStreamSynchronize")

    def _compile(self) -> bytes:
        from cuda.bindings import nvrtc

        def ok(r: Any, name: str) -> Any:
            # NVRTC statuses are not CUresults: cudriver.check does not apply to them.
            if r[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise RuntimeError(f"{name} returned {r[0]!r}")
            return r[1] if len(r) == 2 else None

        src = KERNEL_SOURCE.encode()
        prog = ok(nvrtc.nvrtcCreateProgram(src, b"bench.cu", 0, [], []), "nvrtcCreateProgram")
        try:
            opts = [f"--gpu-architecture={arch_of(self.ordinal)}".encode()]
            ok(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), "nvrtcCompileProgram")
            image = bytes(int(ok(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")))
            ok(nvrtc.nvrtcGetCUBIN(prog, image), "nvrtcGetCUBIN")
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
                self._mod = cu.check(
                    self.drv.cuModuleLoadData(ctypes.addressof(buf)), "cuModuleLoadData"
                )
            f = cu.check(
                self.drv.cuModuleGetFunction(self._mod, name.encode()), "cuModuleGetFunction"
            )
            self._fns[name] = f
        return f

    def _alloc(self, nbytes: int) -> Any:
        p = cu.check(self.drv.cuMemAlloc(nbytes), "cuMemAlloc")
        self._allocs.append(p)
        return p

    def _buffer(self) -> Any:
        if self._x is None:
            self._x = self._alloc(N_X * 4)
            cu.check(self.drv.cuMemsetD32(self._x, 0, N_X), "cuMemsetD32")
        return self._x

    def op_stream_query(self) -> Bench:
        return Bench(per_call_raw(self.drv.cuStreamQuery, (self.h,), "cuStreamQuery"), self.sync)

    def op_event_record(self) -> Bench:
        d = self.drv
        flags = int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        ev = cu.check(d.cuEventCreate(flags), "cuEventCreate")
        self._events.append(ev)
        return Bench(per_call_raw(d.cuEventRecord, (ev, self.h), "cuEventRecord"), self.sync)

    def _launch_args(self, name: str, block: int, params: Any) -> tuple[Any, ...]:
        return (self._fn(name), 1, 1, 1, block, 1, 1, 0, self.h, params, 0)

    def op_launch_empty(self) -> Bench:
        args = self._launch_args("empty", 1, 0)
        return Bench(per_call_raw(self.drv.cuLaunchKernel, args, "cuLaunchKernel"), self.sync)

    def op_launch_ex(self) -> Bench:
        drv = self.drv
        cfg = drv.CUlaunchConfig()
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1
        cfg.sharedMemBytes = 0
        cfg.hStream = self.h
        attr = drv.CUlaunchAttribute()
        attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        attr.value.cooperative = 1
        cfg.attrs = [attr]
        cfg.numAttrs = 1
        args = (cfg, self._fn("empty"), 0, 0)
        return Bench(
            per_call_raw(drv.cuLaunchKernelEx, args, "cuLaunchKernelEx"),
            self.sync,
            "CUlaunchConfig built once, cooperative attribute",
        )

    def op_launch_args(self) -> Bench:
        x = int(self._buffer())
        params = ((2.0, x, N_X), (ctypes.c_float, ctypes.c_void_p, ctypes.c_int))
        args = self._launch_args("axpy3", N_X, params)
        return Bench(
            per_call_raw(self.drv.cuLaunchKernel, args, "cuLaunchKernel"),
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
            per_call_raw(self.drv.cuLaunchKernel, args, "cuLaunchKernel"),
            self.sync,
            "kernelParams as the int address of a pre-packed ctypes void*[3]",
        )

    def _graph(self, count: int) -> Any:
        d = self.drv
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        args = self._launch_args("empty", 1, 0)
        cu.check(d.cuStreamBeginCapture(self.h, mode), "cuStreamBeginCapture")
        try:
            for _ in range(count):
                cu.check(d.cuLaunchKernel(*args), "cuLaunchKernel")
        finally:
            r = d.cuStreamEndCapture(self.h)
        g = cu.check(r, "cuStreamEndCapture")
        exe = cu.check(d.cuGraphInstantiate(g, 0), "cuGraphInstantiate")
        self._graphs.append((g, exe))
        return exe

    def op_graph_launch(self) -> Bench:
        exe = self._graph(1)
        return Bench(
            per_call_raw(self.drv.cuGraphLaunch, (exe, self.h), "cuGraphLaunch"), self.sync
        )

    def op_eager_100(self) -> Bench:
        launch = self.drv.cuLaunchKernel
        args = self._launch_args("empty", 1, 0)

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(*args)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        exe = self._graph(KERNELS_PER_BATCH)
        launch, h = self.drv.cuGraphLaunch, self.h

        def body() -> None:
            launch(exe, h)

        return Bench(per_batch(body, self.sync), self.sync)

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
        fn = self._host_fn(noop)
        return Bench(
            per_call_raw(self.drv.cuLaunchHostFunc, (self.h, fn, 0), "cuLaunchHostFunc"),
            self.sync,
            self._HOST_NOTE,
        )

    def op_host_func_100(self) -> Bench:
        fn = self._host_fn(noop)
        launch, h = self.drv.cuLaunchHostFunc, self.h

        def body() -> None:
            for _ in range(HOST_FUNCS_PER_BATCH):
                launch(h, fn, 0)

        return Bench(per_batch(body, self.sync), self.sync, self._HOST_NOTE)

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []

        def stamp(_p: Any) -> None:
            stamps.append(clock())

        fn = self._host_fn(stamp)
        launch, h = self.drv.cuLaunchHostFunc, self.h

        def enqueue() -> None:
            launch(h, fn, 0)

        return Bench(latency(enqueue, self.sync, stamps), self.sync, self._HOST_NOTE)

    def op_await_stream(self) -> Bench:
        return Bench(
            per_call_raw(self.drv.cuStreamSynchronize, (self.h,), "cuStreamSynchronize"),
            self.sync,
            "no asyncio: the blocking cuStreamSynchronize of the idle stream",
        )

    def _busy_sync(self) -> Bench:
        ns = ctypes.c_ulonglong(SPIN_NS)
        arr = (ctypes.c_void_p * 1)(ctypes.addressof(ns))
        self._keep.extend((ns, arr))
        args = self._launch_args("spin", 1, ctypes.addressof(arr))
        launch, sync, h = self.drv.cuLaunchKernel, self.drv.cuStreamSynchronize, self.h

        def run(n: int) -> float:
            out: list[int] = []
            for _ in range(n):
                t0 = clock()
                cu.check(launch(*args), "cuLaunchKernel")
                cu.check(sync(h), "cuStreamSynchronize")
                out.append(clock() - t0)
            return float(statistics.median(out)) / 1000.0

        return Bench(run, self.sync, "no asyncio: launch + the blocking cuStreamSynchronize")

    def op_await_busy(self) -> Bench:
        return self._busy_sync()

    def op_await_busy_executor(self) -> Bench:
        return self._busy_sync()

    def op_stream_sync(self) -> Bench:
        return Bench(
            per_call_raw(self.drv.cuStreamSynchronize, (self.h,), "cuStreamSynchronize"),
            self.sync,
        )

    def _flag(self) -> Any:
        p = self._alloc(MEMOP_BYTES)
        cu.check(self.drv.cuMemsetD32(p, 1, MEMOP_BYTES // 4), "cuMemsetD32")
        cu.check(self.drv.cuCtxSynchronize(), "cuCtxSynchronize")
        return p

    def op_write_value32(self) -> Bench:
        p = self._flag()
        return Bench(
            per_call_raw(self.drv.cuStreamWriteValue32, (self.h, p, 1, 0), "cuStreamWriteValue32"),
            self.sync,
        )

    def op_wait_value32(self) -> Bench:
        d = self.drv
        p = self._flag()
        geq = int(d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)
        return Bench(
            per_call_raw(d.cuStreamWaitValue32, (self.h, p, 1, geq), "cuStreamWaitValue32"),
            self.sync,
        )

    def op_alloc_free(self) -> Bench:
        alloc, free = self.drv.cuMemAlloc, self.drv.cuMemFree

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES)
                free(r[1])
            dt = clock() - t0
            cu.check(r, "cuMemAlloc")
            return dt / n

        return Bench(run, self.sync, "1 MiB, cuMemAlloc + cuMemFree")

    def op_alloc_free_async(self) -> Bench:
        alloc, free = self.drv.cuMemAllocAsync, self.drv.cuMemFreeAsync
        h = self.h

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES, h)
                free(r[1], h)
            dt = clock() - t0
            cu.check(r, "cuMemAllocAsync")
            return dt / n

        return Bench(run, self.sync, "1 MiB, cuMemAllocAsync + cuMemFreeAsync")

    def _pool(self, threshold: int = (1 << 64) - 1) -> Any:
        d = self.drv
        props = d.CUmemPoolProps()
        props.allocType = d.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.location.type = d.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = self.ordinal
        pool = cu.check(d.cuMemPoolCreate(props), "cuMemPoolCreate")
        attr = d.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD
        value = d.cuuint64_t(threshold)
        cu.check(d.cuMemPoolSetAttribute(pool, attr, value), "cuMemPoolSetAttribute")
        self._pools.append(pool)
        return pool

    def op_pool_alloc_free(self) -> Bench:
        alloc, free = self.drv.cuMemAllocFromPoolAsync, self.drv.cuMemFreeAsync
        h, pool = self.h, self._pool()

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES, pool, h)
                free(r[1], h)
            dt = clock() - t0
            cu.check(r, "cuMemAllocFromPoolAsync")
            return dt / n

        return Bench(run, self.sync, "1 MiB, cuMemAllocFromPoolAsync + cuMemFreeAsync")

    def op_pool_cycle_sync(self) -> Bench:
        d = self.drv
        alloc, free, sync = d.cuMemAllocFromPoolAsync, d.cuMemFreeAsync, d.cuStreamSynchronize
        # A pool of its own at the driver's default threshold (0), so that no peer's
        # setting of the device's default pool (cuda.core keeps all) changes this row.
        h, pool = self.h, self._pool(threshold=0)

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                r = alloc(ALLOC_BYTES, pool, h)
                free(r[1], h)
                sync(h)
            dt = clock() - t0
            cu.check(r, "cuMemAllocFromPoolAsync")
            return dt / n

        return Bench(
            run,
            self.sync,
            "cuMemAllocFromPoolAsync + cuMemFreeAsync + cuStreamSynchronize on a pool at the "
            "driver's default release threshold (0)",
        )

    def recover(self) -> None:
        d = self.drv
        try:
            if int(cu.check(d.cuStreamIsCapturing(self.h), "cuStreamIsCapturing")) != 0:
                g = cu.check(d.cuStreamEndCapture(self.h), "cuStreamEndCapture")
                if g is not None:
                    d.cuGraphDestroy(g)
        except Exception:
            pass
        try:
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
            for pool in self._pools:
                d.cuMemPoolDestroy(pool)
            if self._mod is not None:
                d.cuModuleUnload(self._mod)
            d.cuStreamDestroy(self.h)
            d.cuDevicePrimaryCtxRelease(self.dev)
        except Exception:
            pass
        self._graphs.clear()
        self._events.clear()
        self._allocs.clear()
        self._pools.clear()
        self._keep.clear()
