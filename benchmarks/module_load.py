"""What eager module loading costs: ``Module.load`` of a module of many kernels.

Usage::

    python -m benchmarks.module_load [--kernels 100] [--repeats 30]

Times, as the median of ``--repeats`` loads of one cubin holding ``--kernels`` kernels:
the raw ``cuModuleLoadData``, ``Module.load(eager=False)`` (CUDA's lazy loading),
``Module.load()`` (eager, the default), and for each of the two modes the load followed
by ``module.kernel()`` for every kernel. Run it without ``CUDA_MODULE_LOADING`` set:
the driver's default is lazy loading, which is what ``eager=False`` keeps.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from collections.abc import Callable

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import print_rows


def source(n: int) -> str:
    """``n`` small, distinct kernels (each with its own constant, so none is merged)."""
    return "\n".join(
        f'extern "C" __global__ void k{i}(float* p, int n) {{\n'
        f"    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    if (j < n) p[j] = p[j] * {i + 2}.0f + {i}.0f;\n"
        f"}}"
        for i in range(n)
    )


def median_ms(fn: Callable[[], Callable[[], None]], repeats: int) -> float:
    """Median wall time of ``fn()`` in ms; what it returns is called untimed (the close)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        close = fn()
        times.append(time.perf_counter() - t0)
        close()
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    ctx = cu.Device(0).primary_context()
    ctx.set_current()
    image = cu.compile(source(args.kernels), arch=cu.Device(0), target="cubin")
    names = [f"k{i}" for i in range(args.kernels)]
    buf = ctypes.create_string_buffer(image)

    def raw_load() -> Callable[[], None]:
        h = cu.check(drv.cuModuleLoadData(ctypes.addressof(buf)), "cuModuleLoadData")
        return lambda: cu.check(drv.cuModuleUnload(h), "cuModuleUnload")

    def load(eager: bool, every_kernel: bool) -> Callable[[], Callable[[], None]]:
        def run() -> Callable[[], None]:
            m = cu.Module.load(image, eager=eager)
            if every_kernel:
                for name in names:
                    m.kernel(name)
            return m.close

        return run

    rows = {
        "raw cuModuleLoadData": median_ms(raw_load, args.repeats),
        "Module.load(eager=False)": median_ms(load(False, False), args.repeats),
        "Module.load() (eager)": median_ms(load(True, False), args.repeats),
        "eager=False, then every kernel()": median_ms(load(False, True), args.repeats),
        "eager, then every kernel()": median_ms(load(True, True), args.repeats),
    }
    result = {
        "gpu": cu.Device(0).name,
        "kernels": args.kernels,
        "cubin_bytes": len(image),
        "repeats": args.repeats,
        "median_ms": {k: round(v, 3) for k, v in rows.items()},
    }
    print(f"{args.kernels} kernels, cubin {len(image)} bytes, median of {args.repeats}:")
    print_rows(rows, "ms", 3, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
