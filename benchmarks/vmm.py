"""What ``VirtualBuffer`` costs over the raw virtual-memory calls written by hand.

Usage::

    python -m benchmarks.vmm [--grows 64] [--repeats 7] [--gib 1]

Two operations, each as the median of ``--repeats``, measured in the same run against
the raw ``cuda.bindings`` calls (statuses checked) that do the same work:

* **grow by 2 MiB**: µs per growth of ``--grows`` growths of one granule at the end of a
  reserved range. Raw: ``cuMemCreate`` + ``cuMemMap`` + ``cuMemSetAccess``;
  ``VirtualBuffer.grow(2 MiB)`` makes the same three calls, plus its chunk handle.
* **offload+restore 1 GiB**: µs for one round trip of ``--gib`` GiB mapped as one chunk,
  into and out of one pinned host buffer kept for the whole run. Raw:
  ``cuCtxSynchronize``, ``cuMemcpyDtoHAsync`` + ``cuStreamSynchronize`` (legacy stream),
  ``cuMemUnmap`` + ``cuMemRelease``, then ``cuMemCreate`` + ``cuMemMap`` +
  ``cuMemSetAccess`` and ``cuMemcpyHtoDAsync`` + ``cuStreamSynchronize``;
  ``buf.offload(host=pinned)`` then ``buf.restore()``.

The garbage collector is off while timing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cuda.bindings import driver as drv

import cudriver as cu
from benchmarks.harness import print_rows

MiB = 1 << 20
_SUCCESS = drv.CUresult.CUDA_SUCCESS
_LEGACY = drv.CUstream(1)


def ok(r: tuple[Any, ...]) -> Any:
    """A raw call's output, its status checked (as a hand-written caller would)."""
    if r[0] is not _SUCCESS:
        raise RuntimeError(f"driver call failed: {r[0]}")
    return r[1] if len(r) == 2 else None


def _median_us(fn: Callable[[], float], repeats: int) -> float:
    fn()  # warm-up
    return float(statistics.median(fn() for _ in range(repeats)))


class Raw:
    """The raw calls for one device: its allocation properties and access descriptor."""

    def __init__(self, ordinal: int) -> None:
        prop = drv.CUmemAllocationProp()
        prop.type = drv.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = ordinal
        self.prop = prop
        desc = drv.CUmemAccessDesc()
        desc.location.type = drv.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = ordinal
        desc.flags = drv.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        self.desc = [desc]
        flag = drv.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
        self.gran = int(ok(drv.cuMemGetAllocationGranularity(prop, flag)))

    def map(self, addr: int, size: int) -> Any:
        h = ok(drv.cuMemCreate(size, self.prop, 0))
        ok(drv.cuMemMap(addr, size, 0, h, 0))
        ok(drv.cuMemSetAccess(addr, size, self.desc, 1))
        return h

    @staticmethod
    def unmap(addr: int, size: int, h: Any) -> None:
        ok(drv.cuMemUnmap(addr, size))
        ok(drv.cuMemRelease(h))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--grows", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--gib", type=int, default=1)
    args = parser.parse_args(argv)
    ctx = cu.Device(0).primary_context()
    ctx.set_current()
    raw = Raw(0)
    step = 2 * MiB
    span = args.grows * step
    big = args.gib << 30
    clock = time.perf_counter

    def raw_grow() -> float:
        base = int(ok(drv.cuMemAddressReserve(span, raw.gran, 0, 0)))
        handles = []
        t0 = clock()
        for i in range(args.grows):
            handles.append(raw.map(base + i * step, step))
        dt = clock() - t0
        ok(drv.cuCtxSynchronize())
        for i, h in enumerate(handles):
            raw.unmap(base + i * step, step, h)
        ok(drv.cuMemAddressFree(base, span))
        return dt / args.grows * 1e6

    def vb_grow() -> float:
        buf = cu.VirtualBuffer(span)
        t0 = clock()
        for _ in range(args.grows):
            buf.grow(step)
        dt = clock() - t0
        buf.close()
        return dt / args.grows * 1e6

    host = cu.PinnedBuffer(big, mapped=False)
    base = int(ok(drv.cuMemAddressReserve(big, raw.gran, 0, 0)))
    held = [raw.map(base, big)]

    def raw_round() -> float:
        t0 = clock()
        ok(drv.cuCtxSynchronize())
        ok(drv.cuMemcpyDtoHAsync(host.ptr, base, big, _LEGACY))
        ok(drv.cuStreamSynchronize(_LEGACY))
        raw.unmap(base, big, held.pop())
        held.append(raw.map(base, big))
        ok(drv.cuMemcpyHtoDAsync(base, host.ptr, big, _LEGACY))
        ok(drv.cuStreamSynchronize(_LEGACY))
        return (clock() - t0) * 1e6

    vb = cu.VirtualBuffer(big, nbytes=big)

    def vb_round() -> float:
        t0 = clock()
        vb.offload(host=host)
        vb.restore()
        return (clock() - t0) * 1e6

    gc.disable()
    try:
        # Interleaved, so that drift of the machine affects both alike.
        rows = {
            "grow by 2 MiB: raw cuMemCreate+Map+SetAccess": _median_us(raw_grow, args.repeats),
            "grow by 2 MiB: VirtualBuffer.grow": _median_us(vb_grow, args.repeats),
            f"offload+restore {args.gib} GiB: raw calls": _median_us(raw_round, args.repeats),
            f"offload+restore {args.gib} GiB: VirtualBuffer": _median_us(vb_round, args.repeats),
        }
    finally:
        gc.enable()
        vb.close()
        raw.unmap(base, big, held.pop())
        ok(drv.cuMemAddressFree(base, big))
        host.close()
    keys = list(rows)
    ratios = {
        "grow by 2 MiB": rows[keys[1]] / rows[keys[0]],
        f"offload+restore {args.gib} GiB": rows[keys[3]] / rows[keys[2]],
    }
    for what, r in ratios.items():
        print(f"  {what}: VirtualBuffer / raw = {r:.2f}x")
    result = {
        "gpu": cu.Device(0).name,
        "implementation": cu.info().get("implementation"),
        "us": {k: round(v, 1) for k, v in rows.items()},
        "ratio": {k: round(v, 3) for k, v in ratios.items()},
    }
    print_rows(rows, "µs", 1, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
