"""Sleep and wake: give a model's GPU memory back and restore it at the same address.

A :class:`cudriver.VirtualBuffer` keeps its address range reserved while its physical
memory comes and goes, so a graph captured over it stays valid:

1. the "weights" (64 MiB of float32) live in a VirtualBuffer; a graph that updates them
   in place is captured and replayed;
2. ``buf.offload()`` copies them to pinned host memory and gives the device memory back
   (``mem_get_info()`` shows it free);
3. ``buf.restore()`` maps fresh memory at the same addresses and copies them back; the
   same executable graph is replayed again.

The result is checked against the same kernel launched eagerly on an ordinary
DeviceBuffer. Run it from the repository's root with ``python examples/sleep_wake.py``
(in a checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``sleep_wake: OK`` when the replays after waking gave the expected values.
"""

from __future__ import annotations

import time
from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void step(float* w, float a, float b, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) w[i] = a * w[i] + b;
}
"""

NBYTES = 64 << 20
N = NBYTES // 4
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
MiB = 1 << 20


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"sleep_wake: FAILED: {message}")


def main() -> None:
    """Capture over a VirtualBuffer, offload it, restore it, replay, check."""
    module = cu.Module.load(cu.compile(SOURCE, name="sleep_wake.cu", target="cubin"))
    step = module.kernel("step")
    s = cu.Stream()

    w0 = (np.arange(N, dtype=np.uint32) % 1021).astype(np.float32)
    weights = cu.VirtualBuffer(1 << 30, nbytes=NBYTES)  # reserve 1 GiB, map 64 MiB
    weights.copy_from(w0)
    ptr = weights.ptr

    with s.capture() as g:
        step.launch(s, GRID, BLOCK, weights, np.float32(0.5), np.float32(1.0), N)
    exe = g.instantiate()
    exe.launch(s)
    s.synchronize()

    free_awake, _ = cu.mem_get_info()
    t0 = time.perf_counter()
    weights.offload()  # waits for the device, copies out, unmaps
    t1 = time.perf_counter()
    free_asleep, _ = cu.mem_get_info()
    print(
        f"sleep_wake: offload() gave back {(free_asleep - free_awake) / MiB:.0f} MiB "
        f"in {1e3 * (t1 - t0):.1f} ms"
    )
    if free_asleep - free_awake < NBYTES:
        fail(f"only {free_asleep - free_awake} bytes came back, expected {NBYTES}")

    t0 = time.perf_counter()
    weights.restore()  # fresh memory at the same addresses, contents copied back
    t1 = time.perf_counter()
    print(f"sleep_wake: restore() took {1e3 * (t1 - t0):.1f} ms; address unchanged")
    if weights.ptr != ptr:
        fail("the address changed")
    exe.launch(s)  # the graph captured before offload() still works
    s.synchronize()

    eager = cu.DeviceBuffer.from_array(w0)
    for _ in range(2):
        step.launch(s, GRID, BLOCK, eager, np.float32(0.5), np.float32(1.0), N)
    s.synchronize()
    got, want = weights.copy_to().view(np.float32), eager.copy_to().view(np.float32)
    if not np.array_equal(got, want):
        bad = int(np.count_nonzero(got != want))
        fail(f"{bad} of {N} values differ from the eager run")
    print("sleep_wake: two replays around offload/restore equal the eager run")
    exe.close()
    g.close()
    weights.close()
    eager.close()
    print("sleep_wake: OK")


if __name__ == "__main__":
    main()
