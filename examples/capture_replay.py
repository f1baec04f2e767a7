"""Graph capture: record copies and kernels once, replay them, change them in place.

``with stream.capture() as g:`` records the work enqueued on ``stream`` into a graph
instead of running it: here a device-to-device copy (reset the input), two kernels
and a copy of the result into pinned host memory. ``g.instantiate()`` makes an
executable graph that each ``exe.launch(stream)`` replays with one driver call.

The executable graph is then changed without instantiating it again:

* ``exe.set_kernel_args(node, ...)`` gives one captured kernel node new arguments;
* ``exe.update(g2)`` takes every parameter of another capture of the same topology.

Run it from the repository's root with ``python examples/capture_replay.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``capture_replay: OK`` when every replay gave the expected values.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

extern "C" __global__ void axpy(float* y, float a, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""

N = 4096
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
REPLAYS = 5


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"capture_replay: FAILED: {message}")


def expect(what: str, got: np.ndarray, expected: np.ndarray) -> None:
    """Fail unless ``got`` equals ``expected`` (to float32 rounding)."""
    if not np.allclose(got, expected, rtol=1e-6, atol=0):
        worst = float(np.max(np.abs(got - expected)))
        fail(f"{what}: off by up to {worst} (got {got[:3]}..., expected {expected[:3]}...)")


def main() -> None:
    """Capture, replay, update and check a small graph."""
    module = cu.Module.load(cu.compile(SOURCE, name="capture_replay.cu", target="cubin"))
    scale, axpy = module.kernel("scale"), module.kernel("axpy")

    x0_host = np.arange(N, dtype=np.float32) / 8  # exact in float32
    x0 = cu.DeviceBuffer.from_array(x0_host)  # the input, copied into x by every replay
    x = cu.DeviceBuffer.empty(N, np.float32)
    y = cu.DeviceBuffer.empty(N, np.float32)  # accumulates across replays
    out = cu.PinnedBuffer(y.nbytes)  # the result, written by every replay
    result = out.array(np.float32)  # a numpy view of the pinned memory, no copy

    s = cu.Stream()
    with s.capture() as g:  # nothing runs inside the block: the work is recorded
        x.copy_from(x0, stream=s)  # a copy node: x = x0
        scale.launch(s, GRID, BLOCK, x, np.float32(2.0), N)  # x *= 2
        axpy.launch(s, GRID, BLOCK, y, np.float32(1.0), x, N)  # y += x
        y.copy_to(out, stream=s)  # a copy node: device to pinned host memory
    exe = g.instantiate()
    print(f"capture_replay: captured {g.num_nodes} nodes")
    if g.num_nodes != 4:
        fail(f"the graph has {g.num_nodes} nodes, expected 4 (2 copies, 2 kernels)")

    # Replay: y accumulates 2 * x0 each time.
    y.fill(0)  # synchronous: done before the first replay
    for replay in range(1, REPLAYS + 1):
        exe.launch(s)
        s.synchronize()
        expect(f"replay {replay}", result, replay * 2 * x0_host)

    # One kernel node gets new arguments: the scale kernel, the kernel node that
    # follows the copy (the axpy node follows a kernel node).
    kernel_nodes = [n for n in g.nodes() if n.type is cu.GraphNodeType.KERNEL]
    (scale_node,) = [
        n
        for n in kernel_nodes
        if all(d.type is not cu.GraphNodeType.KERNEL for d in n.dependencies)
    ]
    exe.set_kernel_args(scale_node, x, np.float32(0.5), N)  # x *= 0.5 from now on
    y.fill(0)
    for _ in range(REPLAYS):
        exe.launch(s)
    s.synchronize()
    expect("after set_kernel_args", result, REPLAYS * 0.5 * x0_host)

    # A second capture of the same topology with other arguments: update in place.
    with s.capture() as g2:
        x.copy_from(x0, stream=s)
        scale.launch(s, GRID, BLOCK, x, np.float32(3.0), N)  # x *= 3
        axpy.launch(s, GRID, BLOCK, y, np.float32(-1.0), x, N)  # y -= x
        y.copy_to(out, stream=s)
    exe.update(g2)  # cheaper than g2.instantiate(); raises GraphUpdateError if refused
    y.fill(0)
    for _ in range(REPLAYS):
        exe.launch(s)
    s.synchronize()
    expect("after update", result, -REPLAYS * 3 * x0_host)

    print(
        f"capture_replay: {3 * REPLAYS} replays checked "
        "(as captured, after set_kernel_args, after update)"
    )
    exe.close()
    g2.close()
    g.close()
    print("capture_replay: OK")


if __name__ == "__main__":
    main()
