"""Sharing GPU memory and streams with PyTorch and CuPy, without copies.

Both directions, with each library:

* cudriver to the library: ``torch.from_dlpack(buf)`` / ``cupy.from_dlpack(buf)``
  (DLPack) and ``cupy.asarray(buf)`` (the CUDA Array Interface) see a
  ``DeviceBuffer``'s memory;
* the library to cudriver: ``DeviceBuffer.from_dlpack(tensor, stream=s)`` wraps a
  tensor's memory, ordered after the library's work on it; a tensor or array is also a
  kernel argument as it is (its ``__cuda_array_interface__`` gives the address);
* streams: ``torch.cuda.ExternalStream(int(s))`` (``int(s)`` is the ``CUstream``
  handle) and ``cupy.cuda.Stream.from_external(s)`` (through ``__cuda_stream__``; older
  CuPy: ``cupy.cuda.ExternalStream(int(s))``) run the library's operations on a
  cudriver ``Stream``, and a cudriver kernel launches on a PyTorch or CuPy stream.

Each step checks that a write on one side is seen on the other. A library that is not
installed is reported and its half skipped.

Run it from the repository's root with ``python examples/interop_torch_cupy.py`` (in a
checkout, put ``src`` on ``PYTHONPATH``). Needs a GPU and NVRTC. The last line is
``interop_torch_cupy: OK`` when every check of the libraries present passed.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

import cudriver as cu

SOURCE = r"""
extern "C" __global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""

N = 1 << 16
BLOCK = 256
GRID = (N + BLOCK - 1) // BLOCK
BASE = np.arange(N, dtype=np.float32)


def fail(message: str) -> NoReturn:
    """Exit with status 1 and a message saying what went wrong."""
    raise SystemExit(f"interop_torch_cupy: FAILED: {message}")


def expect(what: str, got: np.ndarray, expected: np.ndarray) -> None:
    """Fail unless ``got`` equals ``expected`` exactly."""
    if not np.array_equal(got, expected):
        fail(f"{what}: got {got[:4]}..., expected {expected[:4]}...")


def with_torch(scale: cu.Kernel, stream: cu.Stream) -> str:
    """Share memory and streams with PyTorch; return what was done."""
    try:
        import torch
    except ImportError:
        return "skipped (PyTorch is not installed)"
    if not torch.cuda.is_available():
        return "skipped (PyTorch sees no CUDA device)"

    # cudriver -> PyTorch (DLPack): the tensor is the buffer's memory.
    buf = cu.DeviceBuffer.from_array(BASE)
    t = torch.from_dlpack(buf)
    if t.data_ptr() != buf.ptr or t.dtype != torch.float32 or tuple(t.shape) != (N,):
        fail(f"torch.from_dlpack gave {t.dtype} {tuple(t.shape)} at {t.data_ptr():#x}")
    t.mul_(2)  # a write on PyTorch's side (its current stream) ...
    torch.cuda.synchronize()
    expect("a PyTorch write seen by cudriver", buf.copy_to(), 2 * BASE)
    buf.copy_from(np.full(N, 7, np.float32))  # ... and one on cudriver's side
    if not bool((t == 7).all()):
        fail("a cudriver write was not seen by PyTorch")

    # A PyTorch operation on a cudriver stream, then a cudriver kernel after it.
    ext = torch.cuda.ExternalStream(int(stream))
    with torch.cuda.stream(ext):
        t.add_(1)  # 8, enqueued on `stream`
    scale.launch(stream, GRID, BLOCK, buf, np.float32(0.5), N)  # runs after the add: 4
    stream.synchronize()
    expect("a PyTorch op on a cudriver stream", buf.copy_to(), np.full(N, 4, np.float32))

    # PyTorch -> cudriver (DLPack): `stream` waits for PyTorch's work on the tensor.
    u = torch.arange(N, dtype=torch.float32, device="cuda")
    ubuf = cu.DeviceBuffer.from_dlpack(u, stream=stream)
    if ubuf.ptr != u.data_ptr() or ubuf.shape != (N,) or ubuf.dtype != np.float32:
        fail(f"DeviceBuffer.from_dlpack gave {ubuf!r}")
    scale.launch(stream, GRID, BLOCK, ubuf, np.float32(3.0), N)
    stream.synchronize()
    expect("a cudriver kernel's write seen by PyTorch", u.cpu().numpy(), 3 * BASE)

    # A cudriver kernel on a PyTorch stream, the tensor itself as its argument.
    ts = torch.cuda.Stream()
    scale.launch(ts, GRID, BLOCK, u, np.float32(2.0), N)  # u: its __cuda_array_interface__
    ts.synchronize()
    expect("a cudriver kernel on a PyTorch stream", u.cpu().numpy(), 6 * BASE)
    return "shared both ways, and streams too"


def with_cupy(scale: cu.Kernel, stream: cu.Stream) -> str:
    """Share memory and streams with CuPy; return what was done."""
    try:
        import cupy
    except ImportError:
        return "skipped (CuPy is not installed)"

    # cudriver -> CuPy (DLPack, then the CUDA Array Interface).
    buf = cu.DeviceBuffer.from_array(BASE)
    c = cupy.from_dlpack(buf)
    if c.data.ptr != buf.ptr or c.shape != (N,) or c.dtype != cupy.float32:
        fail(f"cupy.from_dlpack gave {c.dtype} {c.shape} at {c.data.ptr:#x}")
    c += 1  # a write on CuPy's side ...
    cupy.cuda.get_current_stream().synchronize()
    expect("a CuPy write seen by cudriver", buf.copy_to(), BASE + 1)
    a: Any = cupy.asarray(buf)  # through __cuda_array_interface__: the same memory again
    if a.data.ptr != buf.ptr:
        fail("cupy.asarray(buf) copied the buffer")
    buf.fill(0)  # ... and one on cudriver's side
    if int(cupy.count_nonzero(a)) != 0:
        fail("a cudriver write was not seen by CuPy")

    # A CuPy operation on a cudriver stream, then a cudriver kernel after it. CuPy 14
    # wraps any object with __cuda_stream__; older versions take the handle.
    if hasattr(cupy.cuda.Stream, "from_external"):
        on_stream = cupy.cuda.Stream.from_external(stream)
    else:
        on_stream = cupy.cuda.ExternalStream(int(stream))
    with on_stream:
        a += 5  # enqueued on `stream`
    scale.launch(stream, GRID, BLOCK, buf, np.float32(2.0), N)  # runs after it: 10
    stream.synchronize()
    expect("a CuPy op on a cudriver stream", buf.copy_to(), np.full(N, 10, np.float32))

    # CuPy -> cudriver (DLPack): `stream` waits for CuPy's work on the array.
    x = cupy.arange(N, dtype=cupy.float32)
    xbuf = cu.DeviceBuffer.from_dlpack(x, stream=stream)
    if xbuf.ptr != x.data.ptr or xbuf.shape != (N,):
        fail(f"DeviceBuffer.from_dlpack gave {xbuf!r}")
    scale.launch(stream, GRID, BLOCK, xbuf, np.float32(3.0), N)
    stream.synchronize()
    expect("a cudriver kernel's write seen by CuPy", cupy.asnumpy(x), 3 * BASE)

    # A cudriver kernel on a CuPy stream, the array itself as its argument.
    cs = cupy.cuda.Stream(non_blocking=True)
    scale.launch(cs, GRID, BLOCK, x, np.float32(0.5), N)
    cs.synchronize()
    expect("a cudriver kernel on a CuPy stream", cupy.asnumpy(x), 1.5 * BASE)
    return "shared both ways, and streams too"


def main() -> None:
    """Run the PyTorch half and the CuPy half."""
    module = cu.Module.load(cu.compile(SOURCE, name="interop.cu", target="cubin"))
    scale = module.kernel("scale")
    stream = cu.Stream()
    print(f"interop_torch_cupy: PyTorch: {with_torch(scale, stream)}")
    print(f"interop_torch_cupy: CuPy: {with_cupy(scale, stream)}")
    stream.synchronize()
    print("interop_torch_cupy: OK")


if __name__ == "__main__":
    main()
