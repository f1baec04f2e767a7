"""Vector addition: compile a kernel with NVRTC, load it, launch it on a stream.

The whole path from CUDA C++ source to a checked result:

1. ``cudriver.compile`` turns the source into a cubin for this GPU (NVRTC);
2. ``Module.load`` loads it and ``Module.kernel`` finds the kernel by name;
3. ``Kernel.launch`` runs it on a ``Stream``; events time it;
4. ``DeviceBuffer.copy_to(stream=...)`` copies the result back, and numpy checks it.

Run it from the repository's root with ``python examples/vector_add.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC
(``pip install "cudriver[nvrtc]"``). The last line is ``vector_add: OK`` when the
GPU's sum equals numpy's; otherwise the script exits with status 1 and says why.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

N = 1_000_000
BLOCK = 256


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"vector_add: FAILED: {message}")


def main() -> None:
    """Add two vectors on the GPU and compare the sum with numpy's."""
    cu.init()
    device = cu.Device(0)
    print(f"vector_add: device 0 is {device.name} (compute capability {device.compute_capability})")

    # A cubin rather than PTX: it loads without a JIT step, also where NVRTC is newer
    # than the driver.
    image = cu.compile(SOURCE, name="vector_add.cu", target="cubin")
    module = cu.Module.load(image)
    kernel = module.kernel("vector_add")

    rng = np.random.default_rng(0)
    a = rng.standard_normal(N, dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)

    stream = cu.Stream()
    d_a = cu.DeviceBuffer.from_array(a)  # allocate and copy in (synchronous)
    d_b = cu.DeviceBuffer.from_array(b)
    d_c = cu.DeviceBuffer.empty(N, np.float32)  # uninitialised, remembers dtype and shape

    start, stop = cu.Event(timing=True), cu.Event(timing=True)
    start.record(stream)
    grid = (N + BLOCK - 1) // BLOCK
    kernel.launch(stream, grid, BLOCK, d_a, d_b, d_c, N)  # asynchronous
    stop.record(stream)
    c = d_c.copy_to(stream=stream)  # enqueued after the kernel; filled once it has run
    stream.synchronize()

    expected = a + b
    if c.shape != expected.shape or c.dtype != expected.dtype:
        fail(f"got an array of {c.dtype} {c.shape}, expected {expected.dtype} {expected.shape}")
    if not np.array_equal(c, expected):
        bad = int(np.count_nonzero(c != expected))
        fail(f"{bad} of {N} elements differ from numpy's sum")
    print(f"vector_add: {N} elements added in {start.elapsed_ms(stop):.3f} ms, equal to numpy's")
    print("vector_add: OK")


if __name__ == "__main__":
    main()
