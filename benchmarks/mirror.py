"""What a call costs through each face of the driver mirror, against the raw bindings.

Usage::

    python -m benchmarks.mirror [--calls 200000] [--repeats 7] [--device 0]

Times, in nanoseconds per call (median of ``--repeats`` loops of ``--calls`` calls),
two calls that succeed and do little in the driver: ``cuCtxGetCurrent()`` and
``cuStreamQuery`` of an idle stream, through ``cuda.bindings.driver`` (raw),
``cudriver.driver`` (the checked face: outputs returned) and ``cudriver.compat.driver``
(the compat face: the bindings' tuple returned, failures raised). The last column is
compat over checked: the compat face should cost no more than the checked one.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as raw


def per_call_ns(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    """Median over ``repeats`` loops of ``calls`` calls of ``fn``, in ns per call."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter_ns() - t0) / calls)
    return statistics.median(times)


def measure(calls: int, repeats: int, device: int) -> dict[str, list[float]]:
    import cudriver

    checked, compat = cudriver.driver, cudriver.compat.driver

    checked.cuInit(0)
    ctx = checked.cuDevicePrimaryCtxRetain(checked.cuDeviceGet(device))
    checked.cuCtxSetCurrent(ctx)
    stream = checked.cuStreamCreate(1)
    rows: dict[str, list[float]] = {}
    for label, name, args in (
        ("cuCtxGetCurrent()", "cuCtxGetCurrent", ()),
        ("cuStreamQuery (idle)", "cuStreamQuery", (stream,)),
    ):
        fns = [getattr(m, name) for m in (raw, checked, compat)]
        rows[label] = [per_call_ns(functools.partial(f, *args), calls, repeats) for f in fns]
    checked.cuStreamDestroy(stream)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args(argv)
    rows = measure(args.calls, args.repeats, args.device)
    print(f"ns per call, median of {args.repeats} x {args.calls:,} calls")
    head = ("call", "raw", "checked", "compat", "compat/checked", "compat/raw")
    print("  ".join(f"{h:>22}" if i == 0 else f"{h:>14}" for i, h in enumerate(head)))
    for label, (r, c, k) in rows.items():
        cells = [f"{r:,.0f}", f"{c:,.0f}", f"{k:,.0f}", f"{k / c:.2f}", f"{k / r:.2f}"]
        print(f"{label:>22}  " + "  ".join(f"{v:>14}" for v in cells))
    print(json.dumps({"ns_per_call": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
