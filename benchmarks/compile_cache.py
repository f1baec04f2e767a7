"""What the compile cache saves: cold and warm ``cudriver.compile`` of a 200-line kernel.

Usage::

    python -m benchmarks.compile_cache [--lines 200] [--repeats 10] [--arch sm_90]

Times, as medians of ``--repeats`` runs in milliseconds: NVRTC with the cache off
(``cache=False``), a first compile into an empty cache (NVRTC, then the entry
written), a hit in the process's memory, and a hit on disk (memory emptied first, as
in a new process). NVRTC runs on the host: no GPU is needed when ``--arch`` is given.
Where CuPy and a GPU are present, CuPy's kernel cache on the same source is timed too
(a first compile, and a cached ``RawModule``), for the device's own architecture.
The cache directory is a fresh temporary one, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable

from benchmarks.harness import print_rows


def source(lines: int) -> str:
    """A kernel of about ``lines`` lines: a chain of small device functions."""
    n = max(1, (lines - 5) // 3)
    parts = [f"// {uuid.uuid4().hex}"]  # new each run: the first compile has to miss
    for i in range(n):
        prev = f"f{i - 1}(x)" if i else "x"
        parts.append(
            f"__device__ __forceinline__ float f{i}(float x) {{\n"
            f"    return {prev} * {1.0 + i / 1000:.4f}f + {i}.0f;\n}}"
        )
    parts.append(
        'extern "C" __global__ void chain(float* p, int n) {\n'
        "    int j = blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"    if (j < n) p[j] = f{n - 1}(p[j]);\n"
        "}"
    )
    return "\n".join(parts)


def median_ms(fn: Callable[[], object], repeats: int, before: Callable[[], None]) -> float:
    times = []
    for _ in range(repeats):
        before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _cupy_rows(src: str, repeats: int) -> dict[str, float]:
    """CuPy's kernel cache on the same source (needs CuPy and a GPU; else no rows).

    ``RawModule(...).get_function`` compiles through CuPy's NVRTC and its on-disk cache
    (``CUPY_CACHE_DIR``, a fresh temporary directory here), then its in-memory one.
    """
    folder = tempfile.mkdtemp(prefix="cupy-bench-cache-")
    os.environ["CUPY_CACHE_DIR"] = folder
    try:
        import cupy
    except ImportError:
        return {}
    try:
        fresh = iter(range(1 << 30))

        def cold() -> object:  # a source CuPy has not seen: compile and write
            code = src.replace("// ", f"// cupy {next(fresh)} ", 1)
            return cupy.RawModule(code=code).get_function("chain")

        def warm() -> object:
            return cupy.RawModule(code=src).get_function("chain")

        warm()
        return {
            "CuPy: first compile": median_ms(cold, repeats, lambda: None),
            "CuPy: cached": median_ms(warm, repeats, lambda: None),
        }
    except Exception as exc:  # no GPU, or CuPy without NVRTC: say so, keep our rows
        print(f"CuPy rows skipped: {exc!r}", file=sys.stderr)
        return {}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="cudriver-bench-cache-")
    os.environ["CUDRIVER_CACHE_DIR"] = folder
    os.environ.pop("CUDRIVER_CACHE", None)
    import cudriver as cu

    try:
        src = source(args.lines)

        def nothing() -> None:
            return None

        def empty_cache() -> None:
            cu.clear_compile_cache()

        def empty_memory() -> None:
            cu.clear_compile_cache(disk=False)

        def compile_(cache: bool) -> Callable[[], object]:
            return lambda: cu.compile(src, arch=args.arch, target="cubin", cache=cache)

        rows = {
            "NVRTC, cache off": median_ms(compile_(False), args.repeats, nothing),
            "first compile (NVRTC + write)": median_ms(compile_(True), args.repeats, empty_cache),
            "hit in memory": median_ms(compile_(True), args.repeats, nothing),
            "hit on disk (new process)": median_ms(compile_(True), args.repeats, empty_memory),
        }
        rows.update(_cupy_rows(src, args.repeats))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cold = rows["NVRTC, cache off"]
    result = {
        "lines": len(src.splitlines()),
        "arch": args.arch,
        "nvrtc": ".".join(map(str, cu.nvrtc_version())),
        "repeats": args.repeats,
        "median_ms": {k: round(v, 4) for k, v in rows.items()},
        "speedup_memory": round(cold / rows["hit in memory"], 1),
        "speedup_disk": round(cold / rows["hit on disk (new process)"], 1),
    }
    print(f"a {result['lines']}-line kernel, {args.arch} cubin, median of {args.repeats}:")
    print_rows(rows, "ms", 4, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
