"""asyncio and CUDA streams: await the GPU without blocking the event loop.

Streams and events are awaitable, and ``stream.done_future()`` returns an
``asyncio.Future`` resolved when the GPU reaches that point of the stream (all the
work enqueued on it so far has completed). While a coroutine awaits the GPU, the event
loop runs other coroutines: here a heartbeat that ticks every millisecond.

The script launches a slow kernel on each of several streams, then

1. ``await asyncio.gather(*(s.done_future() for s in streams))``: waits for all of
   them at once, while the heartbeat keeps ticking;
2. ``await stream``: waits for the work on one stream so far;
3. ``await event``: waits for the work before an event's record.

Run it from the repository's root with ``python examples/asyncio_streams.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``asyncio_streams: OK`` when every result is right and the heartbeat ticked while the
GPU worked.
"""

from __future__ import annotations

import asyncio
import time
from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
// Spin for `spin` clock cycles (a few milliseconds), then fill x with v.
extern "C" __global__ void slow_fill(float* x, float v, int n, long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}
"""

STREAMS = 4
N = 1 << 16
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
SPIN = 40_000_000  # clock cycles: about 20 ms at 2 GHz
TIMEOUT_S = 30.0


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"asyncio_streams: FAILED: {message}")


def expect_filled(buf: cu.DeviceBuffer, value: float, what: str) -> None:
    """Fail unless every element of ``buf`` is ``value``."""
    got = buf.copy_to()
    if not np.all(got == value):
        fail(f"{what}: expected {value} everywhere, got {np.unique(got)[:5]}")


async def heartbeat(stop: asyncio.Event) -> int:
    """Tick every millisecond until ``stop`` is set; return the number of ticks."""
    ticks = 0
    while not stop.is_set():
        await asyncio.sleep(0.001)
        ticks += 1
    return ticks


async def run(slow_fill: cu.Kernel, streams: list[cu.Stream], bufs: list[cu.DeviceBuffer]) -> None:
    """Launch work on several streams and await it in three ways."""
    # 1. All streams at once, while another coroutine runs.
    stop = asyncio.Event()
    beat = asyncio.create_task(heartbeat(stop))
    t0 = time.perf_counter()
    for k, (s, buf) in enumerate(zip(streams, bufs, strict=True)):
        slow_fill.launch(s, GRID, BLOCK, buf, float(k + 1), N, SPIN)
    await asyncio.wait_for(asyncio.gather(*(s.done_future() for s in streams)), TIMEOUT_S)
    gpu_ms = (time.perf_counter() - t0) * 1e3
    stop.set()
    ticks = await beat
    for k, buf in enumerate(bufs):
        expect_filled(buf, float(k + 1), f"stream {k}")
    if ticks == 0:
        fail(f"the heartbeat never ticked during {gpu_ms:.1f} ms of GPU work")
    print(
        f"asyncio_streams: {STREAMS} streams done in {gpu_ms:.1f} ms; "
        f"the heartbeat ticked {ticks} times meanwhile"
    )

    # 2. Await one stream: the work enqueued on it so far.
    first = streams[0]
    slow_fill.launch(first, GRID, BLOCK, bufs[0], 10.0, N, SPIN)
    await first
    expect_filled(bufs[0], 10.0, "after await stream")

    # 3. Await an event: the work before its record.
    second = streams[1]
    slow_fill.launch(second, GRID, BLOCK, bufs[1], 20.0, N, SPIN)
    event = second.record()  # a new event, recorded after the kernel
    await event
    expect_filled(bufs[1], 20.0, "after await event")
    print("asyncio_streams: await stream and await event returned after the work")


def main() -> None:
    """Set up, then run the coroutine in a new event loop."""
    # Compiling and loading block for a moment: done before the event loop starts, so
    # that no coroutine waits behind them.
    module = cu.Module.load(cu.compile(SOURCE, name="asyncio_streams.cu", target="cubin"))
    slow_fill = module.kernel("slow_fill")
    streams = [cu.Stream(non_blocking=True) for _ in range(STREAMS)]
    bufs = [cu.DeviceBuffer.empty(N, np.float32) for _ in range(STREAMS)]
    asyncio.run(run(slow_fill, streams, bufs))
    for s in streams:
        s.synchronize()
        s.close()
    print("asyncio_streams: OK")


if __name__ == "__main__":
    main()
