"""NCCL collectives on cudriver streams and buffers, one process per GPU, any number of machines.

Start one process per GPU with a launcher, on one machine or several::

    torchrun --nproc-per-node=2 examples/nccl_allreduce.py
    torchrun --nnodes=2 --nproc-per-node=8 --rdzv-endpoint=HOST:29500 examples/nccl_allreduce.py
    mpirun -n 2 -x MASTER_ADDR=HOST -x MASTER_PORT=29500 python examples/nccl_allreduce.py

or by hand, setting RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT in each.
Rank 0 makes the NCCL unique id and serves it over TCP on MASTER_ADDR:MASTER_PORT; the
others fetch it from there (``cudriver.nccl``). Each rank then all-reduces 64 MiB of
float32, all-gathers, broadcasts and passes a buffer around the ring with send/recv,
checks each result against numpy, and replays an all-reduce captured into a cudriver
graph. Needs nccl4py and the NCCL runtime: ``pip install ".[nccl]"``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import cudriver as cu
from cudriver import nccl as cnccl


def fail(rank: int, what: str) -> None:
    """Say which check failed on which rank, and exit with status 1."""
    print(f"rank {rank}: {what}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    """Join the job, run each collective on a cudriver stream, check it, replay a graph."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="all-reduce size (default 64)")
    parser.add_argument("--replays", type=int, default=10, help="graph replays (default 10)")
    args = parser.parse_args()

    import nccl.core as nccl  # nccl4py

    ranks = cnccl.from_environment()
    r, n = ranks.rank, ranks.world_size
    comm = cnccl.communicator(ranks)  # Device(LOCAL_RANK) current, unique id over TCP
    stream = cu.Stream(non_blocking=True)

    # All-reduce: every rank knows every rank's input, so each checks the sum itself.
    count = args.mib * 2**20 // 4
    base = (np.arange(count) % 1000).astype(np.float32)
    send = cu.DeviceBuffer.from_array(base * (r + 1))  # typed: float32 (cuMemAlloc)
    recv = cu.DeviceBuffer.empty(count, np.float32)
    comm.allreduce(send, recv, nccl.SUM, stream=stream)
    stream.synchronize()  # NCCL's work on the stream is done: read the result
    if not np.array_equal(recv.copy_to(), base * sum(range(1, n + 1))):
        fail(r, "all-reduce differs from numpy")
    print(f"rank {r}/{n}: all-reduce of {args.mib} MiB float32 equals numpy")

    # All-gather, broadcast, and send/recv around the ring (grouped: no deadlock).
    mine = cu.DeviceBuffer.from_array(np.full(4, r, np.int32))
    gathered = cu.DeviceBuffer.empty(4 * n, np.int32)
    comm.allgather(mine, gathered, stream=stream)
    word = cu.DeviceBuffer.from_array(np.full(4, 100 + r, np.int32))
    comm.broadcast(word, word, root=0, stream=stream)
    ring = cu.DeviceBuffer.empty(4, np.int32)
    with nccl.group():
        comm.send(mine, (r + 1) % n, stream=stream)
        comm.recv(ring, (r - 1) % n, stream=stream)
    stream.synchronize()
    if not np.array_equal(gathered.copy_to(), np.repeat(np.arange(n), 4)):
        fail(r, "all-gather differs from numpy")
    if not np.array_equal(word.copy_to(), np.full(4, 100, np.int32)):
        fail(r, "broadcast differs")
    if not np.array_equal(ring.copy_to(), np.full(4, (r - 1) % n, np.int32)):
        fail(r, "send/recv differs")
    print(f"rank {r}/{n}: all-gather, broadcast and send/recv equal numpy")

    # A collective captured into a cudriver graph, replayed: each replay multiplies by n.
    # The buffer is stream-ordered (from the device's memory pool); NCCL takes either kind.
    x = cu.DeviceBuffer.from_array(np.ones(2**20, np.float32), stream=stream)
    with stream.capture() as graph:
        comm.allreduce(x, x, nccl.SUM, stream=stream)
    # `with` destroys both graphs at the end: ncclCommDestroy waits until every graph
    # holding a collective of this communicator is destroyed (forever, were one left),
    # so comm.destroy() refuses while one lives.
    with graph, graph.instantiate() as exe:
        for _ in range(args.replays):
            exe.launch(stream)
        stream.synchronize()
    want = np.float32(n) ** args.replays
    if not np.allclose(x.copy_to(), want, rtol=1e-6):
        fail(r, f"captured all-reduce replayed {args.replays} times is not {want}")
    print(f"rank {r}/{n}: captured all-reduce replayed {args.replays} times")

    comm.destroy()
    print("nccl_allreduce: OK")


if __name__ == "__main__":
    main()
