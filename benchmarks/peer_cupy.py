"""The CuPy peer (through the CUDA runtime, in the device's primary context)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.harness import (
    ALLOC_BYTES,
    HOST_FUNCS_PER_BATCH,
    KERNEL_SOURCE,
    KERNELS_PER_BATCH,
    N_X,
    Bench,
    Peer,
    Unavailable,
    clock,
    latency,
    noop,
    per_batch,
    per_call,
)
from benchmarks.peer_raw import current_context_int


class CupyPeer(Peer):
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
        self.context = current_context_int()

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
            t0 = clock()
            for _ in rng:
                last = s.done
            dt = clock() - t0
            if not last:
                raise RuntimeError("the idle stream reported work pending")
            return dt / n

        return Bench(run, self.sync, "Stream.done")

    def op_event_record(self) -> Bench:
        ev = self.cp.cuda.Event(disable_timing=True)
        self._keep.append(ev)
        return Bench(per_call(ev.record, (self.stream,)), self.sync)

    def op_launch_empty(self) -> Bench:
        k = self._kernel("empty")
        return Bench(self._on_stream(per_call(k, ((1,), (1,), ()))), self.sync, "RawModule")

    def op_launch_ex(self) -> Bench:
        raise Unavailable("CuPy has no launch attributes (cooperative kernels only)")

    def op_launch_args(self) -> Bench:
        np = self.np
        k = self._kernel("axpy3")
        kargs = (np.float32(2.0), self._buffer(), np.int32(N_X))
        return Bench(
            self._on_stream(per_call(k, ((1,), (N_X,), kargs))),
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
        return Bench(per_call(g.launch, (self.stream,)), self.sync, "Stream.begin_capture")

    def op_eager_100(self) -> Bench:
        k = self._kernel("empty")
        grid, block, kargs = (1,), (1,), ()

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                k(grid, block, kargs)

        return Bench(self._on_stream(per_batch(body, self.sync)), self.sync)

    def op_graph_100(self) -> Bench:
        g = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            g.launch(s)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        return Bench(
            per_call(self.stream.launch_host_func, (noop, None)),
            self.sync,
            "Stream.launch_host_func",
        )

    def op_host_func_100(self) -> Bench:
        launch = self.stream.launch_host_func

        def body() -> None:
            for _ in range(HOST_FUNCS_PER_BATCH):
                launch(noop, None)

        return Bench(per_batch(body, self.sync), self.sync, "Stream.launch_host_func")

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []
        launch = self.stream.launch_host_func

        def stamp(_arg: Any) -> None:
            stamps.append(clock())

        def enqueue() -> None:
            launch(stamp, None)

        return Bench(latency(enqueue, self.sync, stamps), self.sync, "Stream.launch_host_func")

    def op_await_stream(self) -> Bench:
        raise Unavailable("CuPy has no asyncio integration")

    def op_await_busy(self) -> Bench:
        raise Unavailable("CuPy has no asyncio integration")

    def op_await_busy_executor(self) -> Bench:
        raise Unavailable("CuPy has no asyncio integration")

    def op_stream_sync(self) -> Bench:
        return Bench(per_call(self.stream.synchronize, ()), self.sync, "Stream.synchronize")

    def op_write_value32(self) -> Bench:
        raise Unavailable("CuPy has no stream memory operations")

    def op_wait_value32(self) -> Bench:
        raise Unavailable("CuPy has no stream memory operations")

    def op_alloc_free(self) -> Bench:
        rt = self.cp.cuda.runtime
        malloc, free = rt.malloc, rt.free

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                free(malloc(ALLOC_BYTES))
            return (clock() - t0) / n

        return Bench(
            run, self.sync, "1 MiB, cupy.cuda.runtime.malloc + free (the pool makes no call)"
        )

    def op_alloc_free_async(self) -> Bench:
        rt = self.cp.cuda.runtime
        malloc, free, sp = rt.mallocAsync, rt.freeAsync, self.stream.ptr

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                free(malloc(ALLOC_BYTES, sp), sp)
            return (clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, cupy.cuda.runtime.mallocAsync + freeAsync")

    def op_pool_alloc_free(self) -> Bench:
        raise Unavailable("CuPy allocates from the device's current pool (the row above)")

    def op_pool_cycle_sync(self) -> Bench:
        rt = self.cp.cuda.runtime
        malloc, free, sp = rt.mallocAsync, rt.freeAsync, self.stream.ptr
        sync = self.stream.synchronize

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                free(malloc(ALLOC_BYTES, sp), sp)
                sync()
            return (clock() - t0) / n

        return Bench(run, self.sync, "runtime.mallocAsync + freeAsync, then synchronize")

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
