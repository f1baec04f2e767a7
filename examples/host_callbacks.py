"""Host callbacks: Python functions that run when a stream reaches them.

``stream.launch_host_func(fn, *args)`` enqueues ``fn(*args)``: it runs on a driver
thread once the work before it has completed, and the work after it waits until it
returns. This script

1. reports progress between kernels from host functions;
2. captures a kernel and a host function into a graph, whose host node runs on every
   replay;
3. raises an exception in a host function: the stream goes on, and the next
   ``synchronize()`` re-raises it as ``cudriver.HostCallbackError``, with the original
   exception as ``__cause__``.

Host functions must not call CUDA (cudriver refuses with ``NotPermittedError``); the
ones here only append to lists.

Run it from the repository's root with ``python examples/host_callbacks.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``host_callbacks: OK`` when every callback ran in order and the error came back.
"""

from __future__ import annotations

import threading
import time
from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void add(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}
"""

N = 1 << 16
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
STEPS = 4
REPLAYS = 3


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"host_callbacks: FAILED: {message}")


def check_batch(batch: list[int]) -> None:
    """A host function that refuses an empty batch."""
    if not batch:
        raise ValueError("empty batch")


def main() -> None:
    """Report progress from host functions, replay one, and collect an error."""
    module = cu.Module.load(cu.compile(SOURCE, name="host_callbacks.cu", target="cubin"))
    add = module.kernel("add")
    s = cu.Stream()
    x = cu.DeviceBuffer.from_array(np.zeros(N, np.float32))

    # 1. Progress reports between kernels.
    progress: list[tuple[int, str]] = []
    main_thread = threading.get_ident()

    def report(step: int) -> None:
        # Runs on a driver thread, after step `step`'s kernel and before the next one.
        where = "main thread" if threading.get_ident() == main_thread else "driver thread"
        progress.append((step, where))

    t0 = time.perf_counter()
    for step in range(1, STEPS + 1):
        add.launch(s, GRID, BLOCK, x, 1.0, N)
        s.launch_host_func(report, step)
    s.synchronize()
    elapsed_ms = (time.perf_counter() - t0) * 1e3
    if [step for step, _ in progress] != list(range(1, STEPS + 1)):
        fail(f"progress reports {progress}, expected steps 1 to {STEPS} in order")
    if any(where != "driver thread" for _, where in progress):
        fail(f"host functions ran on {progress}, expected the driver's thread")
    if not np.all(x.copy_to() == STEPS):
        fail(f"x is not {STEPS} everywhere after {STEPS} kernels")
    print(f"host_callbacks: {STEPS} progress reports in {elapsed_ms:.1f} ms, in order")

    # 2. A host function captured into a graph runs on every replay.
    replayed: list[str] = []
    with s.capture() as g:
        add.launch(s, GRID, BLOCK, x, 1.0, N)
        s.launch_host_func(replayed.append, "replayed")
    exe = g.instantiate()
    for _ in range(REPLAYS):
        exe.launch(s)
    s.synchronize()
    if replayed != ["replayed"] * REPLAYS:
        fail(f"the captured host function ran {len(replayed)} times, expected {REPLAYS}")
    if not np.all(x.copy_to() == STEPS + REPLAYS):
        fail("the captured kernel did not run once per replay")
    print(f"host_callbacks: the captured host function ran on each of {REPLAYS} replays")

    # 3. An exception in a host function is re-raised by synchronize().
    after: list[str] = []
    s.launch_host_func(check_batch, [1, 2, 3])  # fine
    s.launch_host_func(check_batch, [])  # raises ValueError on the driver thread
    add.launch(s, GRID, BLOCK, x, 1.0, N)  # the stream goes on
    s.launch_host_func(after.append, "after the error")
    try:
        s.synchronize()
    except cu.HostCallbackError as exc:
        cause = exc.__cause__
        if not isinstance(cause, ValueError) or str(cause) != "empty batch":
            fail(f"HostCallbackError's cause is {cause!r}, expected ValueError('empty batch')")
        if len(exc.errors) != 1:
            fail(f"HostCallbackError.errors holds {len(exc.errors)} errors, expected 1")
        print(f"host_callbacks: synchronize() re-raised {cause!r} from a host function")
    else:
        fail("synchronize() did not re-raise the host function's exception")
    if after != ["after the error"]:
        fail("the stream did not go on after the failing host function")
    if not np.all(x.copy_to() == STEPS + REPLAYS + 1):
        fail("the kernel after the failing host function did not run")
    s.synchronize()  # the error was collected: nothing more to raise

    exe.close()
    g.close()
    s.close()
    print("host_callbacks: OK")


if __name__ == "__main__":
    main()
