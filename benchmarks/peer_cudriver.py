"""The layer under test: cudriver, through its public API only."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

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
    close_quietly,
    latency,
    noop,
    per_batch,
    per_call,
)


class CudriverPeer(Peer):
    name = "cudriver"

    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self._mod: Any = None
        self._x: Any = None
        self._keep: list[Any] = []

    def setup(self) -> None:
        self.version = cu.__version__
        self.device = cu.Device(self.ordinal)
        self.ctx = self.device.primary_context()
        self.ctx.set_current()
        # Non-blocking, as every peer's stream (a blocking one also orders against the
        # legacy stream: the driver does more per call).
        self.stream = cu.Stream(non_blocking=True, context=self.ctx)
        self.context = int(self.ctx)

    def make_current(self) -> None:
        self.ctx.set_current()

    def sync(self) -> None:
        self.stream.synchronize()

    def _module(self) -> Any:
        if self._mod is None:
            cc = self.device.compute_capability
            image = cu.compile(KERNEL_SOURCE, name="bench.cu", arch=cc, target="cubin")
            self._mod = cu.Module.load(image, context=self.ctx)
        return self._mod

    def _buffer(self) -> Any:
        if self._x is None:
            self._x = cu.DeviceBuffer(N_X * 4)
            self._x.fill(0)
        return self._x

    def op_stream_query(self) -> Bench:
        return Bench(per_call(self.stream.query, ()), self.sync)

    def op_event_record(self) -> Bench:
        ev = cu.Event(timing=False, context=self.ctx)
        self._keep.append(ev)
        return Bench(per_call(ev.record, (self.stream,)), self.sync)

    def op_launch_empty(self) -> Bench:
        k = self._module().kernel("empty")
        return Bench(per_call(k.launch, (self.stream, 1, 1)), self.sync)

    def op_launch_ex(self) -> Bench:
        launch = self._module().kernel("empty").launch
        cfg = cu.LaunchConfig(cooperative=True)
        s = self.stream

        def run(n: int) -> float:
            # The call as written by hand (a partial would copy its keywords per call).
            rng = range(n)
            t0 = clock()
            for _ in rng:
                launch(s, 1, 1, config=cfg)
            return (clock() - t0) / n

        return Bench(run, self.sync, "launch(s, 1, 1, config=LaunchConfig(cooperative=True))")

    def op_launch_args(self) -> Bench:
        k = self._module().kernel("axpy3")
        args = (self.stream, 1, N_X, 2.0, self._buffer(), N_X)
        return Bench(per_call(k.launch, args), self.sync, "Python float and int arguments")

    def op_launch_prepared(self) -> Bench:
        k = self._module().kernel("axpy3")
        plan = k.prepare(1, N_X, 2.0, self._buffer(), N_X)
        self._keep.append(plan)
        return Bench(per_call(plan.launch, (self.stream,)), self.sync, "Kernel.prepare")

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
        return Bench(per_call(exe.launch, (self.stream,)), self.sync)

    def op_eager_100(self) -> Bench:
        launch = self._module().kernel("empty").launch
        s = self.stream

        def body() -> None:
            for _ in range(KERNELS_PER_BATCH):
                launch(s, 1, 1)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_graph_100(self) -> Bench:
        exe = self._graph(KERNELS_PER_BATCH)
        s = self.stream

        def body() -> None:
            exe.launch(s)

        return Bench(per_batch(body, self.sync), self.sync)

    def op_host_func_enqueue(self) -> Bench:
        return Bench(per_call(self.stream.launch_host_func, (noop,)), self.sync)

    def op_host_func_100(self) -> Bench:
        launch_all = self.stream.launch_host_funcs
        batch = (noop,) * HOST_FUNCS_PER_BATCH

        def body() -> None:
            launch_all(batch)

        return Bench(
            per_batch(body, self.sync),
            self.sync,
            f"one Stream.launch_host_funcs of {HOST_FUNCS_PER_BATCH} (the GIL released once)",
        )

    def op_host_func_latency(self) -> Bench:
        stamps: list[int] = []
        launch = self.stream.launch_host_func

        def stamp() -> None:
            stamps.append(clock())

        def enqueue() -> None:
            launch(stamp)

        return Bench(latency(enqueue, self.sync, stamps), self.sync)

    def op_await_stream(self) -> Bench:
        loop = asyncio.new_event_loop()
        self._keep.append(loop)  # closed by close()
        s = self.stream

        async def awaits(n: int) -> float:
            out: list[int] = []
            for _ in range(n):
                t0 = clock()
                await s
                out.append(clock() - t0)
            return float(statistics.median(out))

        def run(n: int) -> float:
            return loop.run_until_complete(awaits(n))

        return Bench(
            run,
            self.sync,
            "median; idle: one query answers, no future",
        )

    def _await_busy(self, executor: bool) -> Bench:
        loop = asyncio.new_event_loop()
        self._keep.append(loop)  # closed by close()
        s = self.stream
        spin = self._module().kernel("spin").launch
        sync = s.synchronize

        async def awaits(n: int) -> float:
            out: list[int] = []
            for _ in range(n):
                t0 = clock()
                spin(s, 1, 1, SPIN_NS)
                if executor:
                    await loop.run_in_executor(None, sync)
                else:
                    await s
                out.append(clock() - t0)
            return float(statistics.median(out)) / 1000.0

        def run(n: int) -> float:
            return loop.run_until_complete(awaits(n))

        how = "run_in_executor" if executor else "await polls, then a future"
        return Bench(run, self.sync, f"median µs; {how}; raw: launch + cuStreamSynchronize")

    def op_await_busy(self) -> Bench:
        return self._await_busy(executor=False)

    def op_await_busy_executor(self) -> Bench:
        return self._await_busy(executor=True)

    def op_stream_sync(self) -> Bench:
        return Bench(per_call(self.stream.synchronize, ()), self.sync)

    def _flag(self) -> Any:
        buf = cu.DeviceBuffer(MEMOP_BYTES)
        buf.fill(1)  # every word 0x01010101: a wait for >= 1 is already satisfied
        self.sync()
        self._keep.append(buf)
        return buf

    def op_write_value32(self) -> Bench:
        buf = self._flag()
        return Bench(
            per_call(self.stream.write_value32, (buf, 1)), self.sync, "address: a DeviceBuffer"
        )

    def op_wait_value32(self) -> Bench:
        buf = self._flag()
        self.stream.write_value32(buf, 1)
        self.sync()
        return Bench(
            per_call(self.stream.wait_value32, (buf, 1)), self.sync, "address: a DeviceBuffer"
        )

    def op_alloc_free(self) -> Bench:
        device_buffer = cu.DeviceBuffer

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                device_buffer(ALLOC_BYTES).close()
            return (clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, DeviceBuffer(n).close()")

    def op_alloc_free_async(self) -> Bench:
        device_buffer = cu.DeviceBuffer
        s = self.stream

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                device_buffer(ALLOC_BYTES, stream=s).close()
            return (clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, DeviceBuffer(n, stream=s).close()")

    def _pool(self) -> cu.MemoryPool:
        pool = cu.MemoryPool(release_threshold=cu.KEEP_ALL)
        self._keep.append(pool)
        return pool

    def op_pool_alloc_free(self) -> Bench:
        device_buffer, s, pool = cu.DeviceBuffer, self.stream, self._pool()

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                device_buffer(ALLOC_BYTES, stream=s, pool=pool).close()
            return (clock() - t0) / n

        return Bench(run, self.sync, "1 MiB, DeviceBuffer(n, stream=s, pool=pool).close()")

    def op_pool_cycle_sync(self) -> Bench:
        device_buffer, s, pool = cu.DeviceBuffer, self.stream, self._pool()
        sync = s.synchronize

        def run(n: int) -> float:
            rng = range(n)
            t0 = clock()
            for _ in rng:
                device_buffer(ALLOC_BYTES, stream=s, pool=pool).close()
                sync()
            return (clock() - t0) / n

        return Bench(run, self.sync, "a MemoryPool (KEEP_ALL threshold), then stream.synchronize()")

    def recover(self) -> None:
        try:
            if self.stream.is_capturing:
                # Ends the broken capture (the stream is usable afterwards) and drops
                # whatever graph it made.
                self.stream.end_capture().close()
        except Exception:
            pass
        try:
            self.stream.synchronize()
        except Exception:
            pass

    def close(self) -> None:
        close_quietly(reversed(self._keep))
        self._keep.clear()
        close_quietly((self._x, self._mod, getattr(self, "stream", None)))
