"""The ``cuda.core`` peer (1.x, or 0.x's ``cuda.core.experimental``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.harness import (
    ALLOC_BYTES,
    KERNEL_SOURCE,
    KERNELS_PER_BATCH,
    N_X,
    Bench,
    Peer,
    Unavailable,
    clock,
    close_quietly,
    per_batch,
    per_call,
)
from benchmarks.peer_raw import current_context_int


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


class CudaCorePeer(Peer):
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
        self.context = current_context_int()

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
        return Bench(per_call(self.stream.record, (ev,)), self.sync, "stream.record(event)")

    def op_launch_empty(self) -> Bench:
        args = (self.stream, self._config(1), self._kernel("empty"))
        return Bench(per_call(self.cc.launch, args), self.sync)

    def op_launch_ex(self) -> Bench:
        config = self._config(1)
        # The cooperative flag's name has changed between cuda.core versions; set only one
        # the config already has, so that a plain launch is never measured in its place.
        name = next((n for n in ("cooperative_launch", "is_cooperative") if hasattr(config, n)), "")
        if not name:
            raise Unavailable(f"cuda.core {self.version}'s LaunchConfig has no cooperative launch")
        setattr(config, name, True)
        args = (self.stream, config, self._kernel("empty"))
        return Bench(per_call(self.cc.launch, args), self.sync, f"{name}=True")

    def op_launch_args(self) -> Bench:
        np = self.np
        k = self._kernel("axpy3")
        args = (self.stream, self._config(N_X), k, np.float32(2.0), self._buffer(), np.int32(N_X))
        return Bench(per_call(self.cc.launch, args), self.sync, "numpy scalars and a Buffer")

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
        return Bench(per_call(g.launch, (self.stream,)), self.sync, "create_graph_builder()")

    def op_eager_100(self) -> Bench:
        launch, s, cfg, k = self.cc.launch, self.stream, self._config(1), self._kernel("empty")

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(s, cfg, k)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        g = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            g.launch(s)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        raise Unavailable("cuda.core has host callbacks only inside graphs")

    def op_host_func_100(self) -> Bench:
        raise Unavailable("cuda.core has host callbacks only inside graphs")

    def op_host_func_latency(self) -> Bench:
        raise Unavailable("cuda.core has host callbacks only inside graphs")

    def op_await_stream(self) -> Bench:
        raise Unavailable("cuda.core has no asyncio integration")

    def op_await_busy(self) -> Bench:
        raise Unavailable("cuda.core has no asyncio integration")

    def op_await_busy_executor(self) -> Bench:
        raise Unavailable("cuda.core has no asyncio integration")

    def op_stream_sync(self) -> Bench:
        return Bench(per_call(self.stream.sync, ()), self.sync, "Stream.sync")

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
            t0 = clock()
            for _ in rng:
                allocate(ALLOC_BYTES, stream=s).close(s)
            return (clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, dev.allocate(n, stream=s).close(s)")

    def op_pool_alloc_free(self) -> Bench:
        raise Unavailable("cuda.core's allocate row above is its pooled allocation")

    def op_pool_cycle_sync(self) -> Bench:
        allocate, s = self.dev.allocate, self.stream
        sync = s.sync

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                allocate(ALLOC_BYTES, stream=s).close(s)
                sync()
            return (clock() - t0) / n

        return Bench(run, self.sync, "dev.allocate(n, stream=s).close(s), then s.sync()")

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
