"""All-reduce bus bandwidth through cudriver objects against nccl4py with its own buffers.

Usage::

    python -m benchmarks.nccl_allreduce [--ranks 2] [--iters 50] [--json FILE]

Spawns one process per GPU (``--ranks``, default every GPU, at least two). Each rank
joins one communicator (``cudriver.nccl.communicator``, the unique id over TCP on
localhost) and, in the same run, times ``comm.allreduce(send, recv, SUM, stream=...)``
with these kinds of buffers and streams:

* **cudriver**: ``DeviceBuffer.empty(count, np.float32)`` on a cudriver ``Stream``,
  through the communicator's direct path (``cudriver.nccl.Communicator.allreduce``);
* **cudriver via nccl4py**: the same buffers and stream given to nccl4py's own
  ``allreduce`` (``comm.nccl``), which resolves each buffer through DLPack;
* **bindings, ints**: nccl4py's bindings (``nccl.bindings.nccl.all_reduce``) called with
  the pointers, count, type and stream as ints: the floor of any Python layer;
* **nccl4py Buffer**: ``nccl.mem_alloc(nbytes)`` (a ``cuda.core`` ``Buffer``, which
  NCCL sees as bytes) on a ``cuda.core`` stream;
* **nccl4py CuPy**: ``nccl.cupy.empty(count, np.float32)`` on the same ``cuda.core``
  stream, where CuPy is installed.

Two numbers per kind and size: the bus bandwidth, ``2 (n - 1) / n * bytes / time``
(NCCL's own definition for all-reduce) from CUDA events around ``--iters`` calls after
five warm-ups, and the host time per call (wall clock of ``--iters`` enqueues of a
1 KiB all-reduce, then one synchronise), which is nccl4py's buffer resolution plus
NCCL's enqueue. Rank 0 prints the table; the slowest rank's time counts. Rank 0 also
times nccl4py's resolution of one buffer of each kind (``nccl.core.buffer.NcclBuffer``,
an internal of nccl4py 0.6) and cudriver's two array protocols alone.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
import traceback
from typing import Any

import numpy as np

SIZES_MIB = (1, 16, 64, 256)
KINDS = ("cudriver", "cudriver via nccl4py", "bindings, ints", "nccl4py Buffer", "nccl4py CuPy")
#: The peers a cudriver row is judged against (the others are for the breakdown).
PEERS = ("nccl4py Buffer", "nccl4py CuPy")
#: Bus bandwidth within this fraction of the best peer's counts as level (run-to-run noise).
BW_NOISE = 0.03


def _rank(ranks: Any, iters: int, out: Any) -> None:
    try:
        import nccl.core as nccl
        from cuda.core import Device as CoreDevice

        import cudriver as cu

        comm = cu.nccl.communicator(ranks, timeout=120)
        n = ranks.world_size
        ours = cu.Stream(non_blocking=True)
        core_dev = CoreDevice(ranks.local_rank)
        core_dev.set_current()
        theirs = core_dev.create_stream()
        try:
            import cupy  # noqa: F401

            has_cupy = True
        except ImportError:
            has_cupy = False

        from nccl.bindings import nccl as raw_nccl

        raw_comm = comm.nccl._comm

        class Ints:
            """A buffer as the ints NCCL takes: the floor of any Python layer."""

            def __init__(self, count: int) -> None:
                self.buf = cu.DeviceBuffer.empty(count, np.float32)
                self.ptr, self.count = int(self.buf), count

        def call(kind: str, a: Any, b: Any, s: Any) -> None:
            if kind == "cudriver":
                comm.allreduce(a, b, nccl.SUM, stream=s)
            elif kind == "bindings, ints":
                raw_nccl.all_reduce(a.ptr, b.ptr, a.count, 7, 0, raw_comm, s)
            else:
                comm.nccl.allreduce(a, b, nccl.SUM, stream=s)

        def make(kind: str, nbytes: int) -> tuple[Any, Any, Any]:
            count = nbytes // 4
            if kind in ("cudriver", "cudriver via nccl4py"):
                a = cu.DeviceBuffer.empty(count, np.float32)
                return a, cu.DeviceBuffer.empty(count, np.float32), ours
            if kind == "bindings, ints":
                return Ints(count), Ints(count), int(ours.handle)
            if kind == "nccl4py Buffer":
                return nccl.mem_alloc(nbytes), nccl.mem_alloc(nbytes), theirs
            return (
                nccl.cupy.empty(nbytes // 4, np.float32),
                nccl.cupy.empty(nbytes // 4, np.float32),
                theirs,
            )

        def sync(stream: Any) -> None:
            if isinstance(stream, int):
                ours.synchronize()
            elif hasattr(stream, "sync"):
                stream.sync()
            else:
                stream.synchronize()

        kinds = [k for k in KINDS if has_cupy or k != "nccl4py CuPy"]
        rows: dict[str, dict[str, float]] = {k: {} for k in kinds}
        for kind in kinds:  # host time per call, on a 1 KiB all-reduce
            a, b, s = make(kind, 1024)
            for _ in range(20):
                call(kind, a, b, s)
            sync(s)
            t0 = time.perf_counter()
            for _ in range(iters * 10):
                call(kind, a, b, s)
            t1 = time.perf_counter()
            sync(s)
            rows[kind]["host_us"] = (t1 - t0) / (iters * 10) * 1e6
        for mib in SIZES_MIB:
            nbytes = mib * 2**20
            for kind in kinds:
                a, b, s = make(kind, nbytes)
                for _ in range(5):
                    call(kind, a, b, s)
                sync(s)
                e0, e1 = cu.Event(timing=True), cu.Event(timing=True)
                e0.record(s)
                for _ in range(iters):
                    call(kind, a, b, s)
                e1.record(s)
                e1.synchronize()
                ms = e0.elapsed_ms(e1) / iters
                rows[kind][f"{mib}MiB_ms"] = ms
                rows[kind][f"{mib}MiB_busbw"] = 2 * (n - 1) / n * nbytes / (ms * 1e-3) / 1e9
                del a, b
        if ranks.rank == 0:
            rows["resolution"] = _resolution(nccl, cu, has_cupy)
        comm.destroy()
        out.put((ranks.rank, rows))
    except BaseException:
        out.put((ranks.rank, traceback.format_exc()))


def _per_call_us(fn: Any, n: int = 3000) -> float:
    for _ in range(100):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def _resolution(nccl: Any, cu: Any, has_cupy: bool) -> dict[str, float]:
    """µs for nccl4py to resolve one buffer of each kind (its ``NcclBuffer``, internal)."""
    from nccl.core.buffer import NcclBuffer

    buf = cu.DeviceBuffer.empty(256, np.float32)

    class ArrayInterfaceOnly:
        def __init__(self) -> None:
            self.__cuda_array_interface__ = buf.__cuda_array_interface__

    only = ArrayInterfaceOnly()
    theirs = nccl.mem_alloc(1024)
    times = {
        "cudriver DeviceBuffer": _per_call_us(lambda: NcclBuffer(buf)),
        "its __cuda_array_interface__ alone": _per_call_us(lambda: NcclBuffer(only)),
        "nccl4py mem_alloc Buffer": _per_call_us(lambda: NcclBuffer(theirs)),
        "cudriver __dlpack__() alone": _per_call_us(lambda: buf.__dlpack__()),
        "cudriver __cuda_array_interface__ alone": _per_call_us(
            lambda: buf.__cuda_array_interface__
        ),
    }
    if has_cupy:
        arr = nccl.cupy.empty(256, np.float32)
        times["CuPy array"] = _per_call_us(lambda: NcclBuffer(arr))
        times["CuPy __dlpack__() alone"] = _per_call_us(lambda: arr.__dlpack__())
        times["CuPy __cuda_array_interface__ alone"] = _per_call_us(
            lambda: arr.__cuda_array_interface__
        )
    return times


def targets(
    table: dict[str, dict[str, float]], resolution: dict[str, float]
) -> list[tuple[str, bool, str]]:
    """Each target of the NCCL rows: ``(what, met, the numbers)``."""
    out: list[tuple[str, bool, str]] = []
    peers = [k for k in PEERS if k in table]
    ours = table["cudriver"]
    best_host = min(table[k]["host_us"] for k in peers)
    out.append(
        (
            "host time per 1 KiB all-reduce <= the best peer's",
            ours["host_us"] <= best_host,
            f"{ours['host_us']:.1f} µs against {best_host:.1f}",
        )
    )
    for m in SIZES_MIB:
        key = f"{m}MiB_busbw"
        best = max(table[k][key] for k in peers)
        out.append(
            (
                f"bus bandwidth at {m} MiB >= the best peer's (within {BW_NOISE:.0%})",
                ours[key] >= best * (1 - BW_NOISE),
                f"{ours[key]:.1f} GB/s against {best:.1f}",
            )
        )
    for proto in ("__dlpack__()", "__cuda_array_interface__"):
        theirs_key = f"CuPy {proto} alone"
        if theirs_key in resolution:
            mine, theirs = resolution[f"cudriver {proto} alone"], resolution[theirs_key]
            out.append(
                (
                    f"DeviceBuffer.{proto.rstrip('()')} <= CuPy's",
                    mine <= theirs,
                    f"{mine:.2f} µs against {theirs:.2f}",
                )
            )
    if "CuPy array" in resolution:
        mine, theirs = resolution["cudriver DeviceBuffer"], resolution["CuPy array"]
        out.append(
            (
                "nccl4py resolving a DeviceBuffer <= resolving a CuPy array",
                mine <= theirs,
                f"{mine:.2f} µs against {theirs:.2f}",
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--ranks", type=int, default=0, help="processes (default: every GPU)")
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    import cudriver as cu

    cu.init()
    world = args.ranks or cu.Device.count()
    if world < 2 or world > cu.Device.count():
        print(f"needs 2 to {cu.Device.count()} ranks, one per GPU; got {world}", file=sys.stderr)
        return 2
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spawn = multiprocessing.get_context("spawn")
    out = spawn.Queue()
    ranks = [cu.nccl.Ranks(r, world, r, "127.0.0.1", port) for r in range(world)]
    procs = [spawn.Process(target=_rank, args=(r, args.iters, out)) for r in ranks]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    deadline = time.monotonic() + 300
    try:
        while len(results) < world:
            rank, rows = out.get(timeout=max(deadline - time.monotonic(), 1))
            if isinstance(rows, str):
                print(f"rank {rank} failed:\n{rows}", file=sys.stderr)
                return 1
            results[rank] = rows
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    resolution = results[0].pop("resolution")
    for r in results:
        results[r].pop("resolution", None)
    kinds = list(results[0])
    # The slowest rank's time counts.
    table = {
        k: {
            key: (
                min(results[r][k][key] for r in results)
                if key.endswith("busbw")
                else max(results[r][k][key] for r in results)
            )
            for key in results[0][k]
        }
        for k in kinds
    }
    dev = cu.Device(0)
    print(f"# all-reduce, {world} ranks on {dev.name}, float32 SUM, {args.iters} iterations")
    head = "| kind | host µs/call (1 KiB) | " + " | ".join(f"{m} MiB GB/s" for m in SIZES_MIB)
    print(head + " |")
    print("|" + " --- |" * (2 + len(SIZES_MIB)))
    for k in kinds:
        cells = [f"{table[k]['host_us']:.1f}"] + [
            f"{table[k][f'{m}MiB_busbw']:.1f}" for m in SIZES_MIB
        ]
        print(f"| {k} | " + " | ".join(cells) + " |")
    base = table["cudriver"]
    for k in kinds[1:]:
        ratios = [base[f"{m}MiB_busbw"] / table[k][f"{m}MiB_busbw"] for m in SIZES_MIB]
        print(
            f"cudriver / {k}: bus bandwidth x"
            + ", x".join(f"{r:.3f}" for r in ratios)
            + f"; host time per call x{base['host_us'] / table[k]['host_us']:.2f}"
        )
    print("nccl4py's resolution of one buffer, µs per call (rank 0):")
    for what, us in resolution.items():
        print(f"  {what:40s} {us:7.2f}")
    verdicts = targets(table, resolution)
    print("targets:")
    for what, ok, detail in verdicts:
        print(f"  {'PASS' if ok else 'MISS'}  {what}: {detail}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            doc = {
                "ranks": world,
                "gpu": dev.name,
                "table": table,
                "resolution": resolution,
                "targets": [{"target": w, "pass": ok, "detail": d} for w, ok, d in verdicts],
            }
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
